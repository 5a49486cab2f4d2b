/* SPDX-License-Identifier: MIT */
/* registry.c — the one list of protocol parsers, in detection priority order:
 * specific protocols first, generic (which accepts anything) last. */
#include <stdio.h>
#include <string.h>

#include "proto.h"

const struct tb_proto *const tb_protos[] = {
    &tb_proto_http1,
    &tb_proto_postgres, /* before mysql: its checks are stricter */
    &tb_proto_mysql,
    &tb_proto_redis,
    &tb_proto_memcached,
    &tb_proto_ajp,
    &tb_proto_fastcgi,
    &tb_proto_tls,
    &tb_proto_generic,
    NULL,
};

const struct tb_proto *tb_proto_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; tb_protos[i]; i++)
        if (strcmp(tb_protos[i]->name, name) == 0)
            return tb_protos[i];
    /* The tiers file may say "http1" or "postgresql"; both names mean the
     * same parser. */
    if (strcmp(name, "http1") == 0)
        return &tb_proto_http1;
    if (strcmp(name, "postgresql") == 0)
        return &tb_proto_postgres;
    return NULL;
}

size_t tb_proto_names(char *out, size_t cap)
{
    size_t n = 0;
    if (cap == 0)
        return 0;
    out[0] = '\0';
    for (size_t i = 0; tb_protos[i]; i++) {
        int k = snprintf(out + n, cap - n, "%s%s", i ? ", " : "", tb_protos[i]->name);
        if (k < 0 || (size_t)k >= cap - n)
            return n; /* cut at the last whole name */
        n += (size_t)k;
    }
    return n;
}
