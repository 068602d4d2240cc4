/* The worked example of boltzattn.h made a program: a tiny boltzmann
 * attention model trained on bracket matching (T = 8) through the library's
 * trainer, then its held-out accuracy. An optional argument sets the number
 * of steps (default 300; tests/install.sh runs 40).
 *
 * build: cc -O2 -o train_example train_example.c $(pkg-config --cflags --libs boltzattn)
 * cmake: cmake -S . -B build -DCMAKE_PREFIX_PATH=PREFIX && cmake --build build
 */
#include <boltzattn.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 300;
    char err[BA_ERR_LEN];
    ba_dataset *data;
    if (ba_dataset_brackets(&data, 8, 1, 512, 1234, err)) { puts(err); return 1; }
    ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, 8);
    ba_config_set_data(&cfg, data);        // vocabulary, head and output sizes
    ba_train_settings s = ba_train_settings_default(steps);
    s.eval_every = s.save_every = 0;      // only the final evaluation
    ba_trainer *t;
    if (ba_trainer_init(&t, &cfg, data, NULL, &s, err)) { puts(err); return 1; }
    ba_train_outcome out;                 // a directory instead of NULL keeps
    if (ba_trainer_run(t, NULL, NULL, &out, err)) { puts(err); return 1; } // the files
    printf("held-out accuracy %.2f %%\n", 100 * out.final.accuracy);
    ba_trainer_free(t);
    ba_dataset_free(data);
    return 0;
}
