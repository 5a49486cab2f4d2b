/* SPDX-License-Identifier: MIT */
/* linkstore.h — what linking and whatif read and keep (linkstore.c): every
 * request with the columns linking needs in one pass, each downstream
 * request's link (parent, score, exact or ambiguous), and named blobs of
 * precomputed model inputs tied to the requests they were computed from
 * (docs/whatif.md "Stored inputs", docs/storage.md). */
#ifndef TB_LINKSTORE_H
#define TB_LINKSTORE_H

#include "tb.h"
#include "request.h"
#include "store.h"

/* Every stored request in arrival order (ties: row id, the order of
 * tb_store_requests), with only the columns linking and the trees use:
 * tier, server, client, conn, class, arrival, departure (req_bytes,
 * resp_bytes, status and flags are 0). (*rowid)[i] is request i's row id in
 * table requests. Both arrays are malloc'd and owned by the caller. One full
 * scan in row order and a radix sort: no SQL sort over the whole table. */
int tb_store_link_rows(struct tb_store *st, struct tb_request **rq, int64_t **rowid, size_t *n);

/* Requests counted per tier and client machine, for deciding who calls whom
 * without reading whole rows: (*counts)[tier * *nep + e] = requests of tier
 * id `tier` (0..ntiers; rows of other tiers are skipped) whose client is
 * endpoint e, whose address is (*ep)[e] (port 0; endpoints are machines, so
 * few). One scan of two columns, no sort. Both arrays malloc'd, owned by the
 * caller. */
int tb_store_tier_clients(struct tb_store *st, uint32_t ntiers, uint64_t **counts,
                          struct tb_addr **ep, size_t *nep);

/* What the stored requests are, as a short text: derived results stored
 * with it are valid while it does not change (requests are only ever
 * appended, so the largest row id and the captures' count tell). *stable is
 * false while a capture is running (results computed now are not worth
 * keeping). */
int tb_store_stamp(struct tb_store *st, char *buf, size_t len, bool *stable);

/* Named blob (model inputs): TB_E_NOTFOUND when none is stored under `name`
 * with this version and stamp. *data is malloc'd, owned by the caller. */
int tb_store_model_get(struct tb_store *st, const char *name, int64_t version, const char *stamp,
                       void **data, size_t *len);
/* Replaces the blob stored under `name` (kept in parts of at most 16 MiB).
 * TB_E_PERM without writing when the database is read-only. */
int tb_store_model_put(struct tb_store *st, const char *name, int64_t version, const char *stamp,
                       const void *data, size_t len);

/* The version and stamp of the blob stored under `name`, without reading
 * it: TB_E_NOTFOUND when none (or no table models: a database from before
 * schema 6 opened read-only). */
int tb_store_model_stamp(struct tb_store *st, const char *name, int64_t *version, char *stamp,
                         size_t len);

/* Table links read back by position: the requests are given by their row ids
 * (rowid[0..n), any order, each once); parent[i] (n entries, written) = 1 +
 * the position of request i's stored parent, 0 when it has none or no row.
 * *rows = rows read, *linked = those with a parent, *exact = kind 1,
 * *ambiguous = kind 2. TB_E_NOTFOUND when a row names a request or parent
 * not among them (links of other requests: not to be used). */
int tb_store_links_get(struct tb_store *st, const int64_t *rowid, size_t n, uint64_t *parent,
                       uint64_t *rows, uint64_t *linked, uint64_t *exact, uint64_t *ambiguous);

/* Replaces table links with one row per downstream request i (kind[i] != 0):
 * request = rowid[i], parent = rowid[parent[i] - 1] (NULL when parent[i] is
 * 0), score[i], kind[i] (enum tb_link_kind in link.h: 1 exact, 2 ambiguous,
 * 3 scored, 4 no parent found). TB_E_PERM when read-only. */
int tb_store_links_put(struct tb_store *st, const int64_t *rowid, const uint64_t *parent,
                       const float *score, const uint8_t *kind, size_t n);

#endif
