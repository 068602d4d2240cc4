/* The attention core in double (src/attention_core.h): the model's layer
 * when ba_real is double, and the public op's f64 entry points. */
#define AT_REAL double
#define AT_SFX f64
#include "model/attention_core.h"
