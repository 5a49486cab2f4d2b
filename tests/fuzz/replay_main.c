/* SPDX-License-Identifier: MIT */
/* replay_main.c — runs a libFuzzer harness over files or folders of inputs, so
 * every fuzz target also builds and runs without libFuzzer (crash replay and
 * the corpus smoke test). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                fclose(f);
                free(buf);
                return 1;
            }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        if (r == 0)
            break;
        len += r;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

static int run_path(const char *path, unsigned *count)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "replay: no such file or folder: %s\n", path);
        return 1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        ++*count;
        return run_file(path);
    }
    DIR *d = opendir(path);
    if (!d)
        return 1;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
        rc |= run_path(sub, count);
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    unsigned count = 0;
    int rc = 0;
    for (int i = 1; i < argc; i++)
        rc |= run_path(argv[i], &count);
    /* Random inputs on top of the corpus: cheap, deterministic, catches the
     * shallow crashes even where the corpus is thin. */
    uint64_t s = 0x9e3779b97f4a7c15ull;
    uint8_t buf[2048];
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)(s % sizeof buf);
        for (size_t j = 0; j < n; j++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            buf[j] = (uint8_t)s;
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("replayed %u files and 20000 random inputs\n", count);
    return rc;
}
