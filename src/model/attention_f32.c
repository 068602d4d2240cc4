/* The attention core in float (src/attention_core.h): the model's layer
 * when ba_real is float, and the public op's f32 entry points. */
#define AT_REAL float
#define AT_SFX f32
#include "model/attention_core.h"
