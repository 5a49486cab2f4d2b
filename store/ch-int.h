/* SPDX-License-Identifier: MIT */
/* ch-int.h — private to store/: the ClickHouse store's row encoders and single INSERTs, which
 * the live sender (ch_live.c) batches, spools and settles itself. */
#ifndef TB_CH_INT_H
#define TB_CH_INT_H

#include "buf.h"
#include "ch.h"

enum tb__ch_table { TB__CH_REQUESTS, TB__CH_CONNECTIONS, TB__CH_HOSTS };

/* Appends one request row (RowBinary, the columns of tb_ch_request) to b and
 * numbers it with the sensor's next seq (*seq, when not NULL). Texts are
 * cached in ch: call from one thread. */
int tb__ch_put_request(struct tb_ch *ch, const struct tb_catalog *cat,
                       const struct tb_request *r, struct tb_buf *b, uint64_t *seq);
/* Appends one connection row to b. */
int tb__ch_put_conn(struct tb_ch *ch, const struct tb_catalog *cat, const struct tb_conn *c,
                    struct tb_buf *b);
/* One INSERT of len bytes of rows into table t, under query_id when not
 * NULL (ClickHouse refuses a second query under an id still running). On
 * failure *maybe_sent says whether the server may have read it all (a
 * timeout or a reset after connecting), or a cluster may hold part of it
 * (an error answer through a Distributed table): the caller must then ask
 * before sending it again. No retry here (tb_ch_set_retry is not consulted beyond
 * what http() does: give ch a retry of 0). */
int tb__ch_insert(struct tb_ch *ch, enum tb__ch_table t, const void *p, size_t len,
                  const char *query_id, bool *maybe_sent);
/* A batch that may have reached the server, as tb__ch_settle needs it. */
struct tb__ch_batch {
    enum tb__ch_table t;
    const void *p;           /* the rows as sent (RowBinary) */
    size_t len;
    uint64_t no, rows;
    /* requests: the seq range; connections: the range of their conn ids
     * (0, 0: unknown, sent again whole) */
    uint64_t first, last;
    const char *query_id;    /* the id its insert ran under (tb__ch_batch_id) */
};
#define TB__CH_BUSY 1   /* tb__ch_settle: the insert may still run: ask again later */
#define TB__CH_RESEND 2 /* tb__ch_settle: none of the batch is stored: send it whole */
/* After an insert of b failed with maybe_sent (tb__ch_insert), settles it:
 * the one rule for live sensors and offline captures. TB__CH_BUSY until the
 * server has answered for SETTLE (2 s, once per return of the server: an
 * insert it got before it stalled may still wait in its accept queue) and no
 * longer runs b's query id; then counts b's seq range: all there, 0; none,
 * TB__CH_RESEND; some (a cluster whose shards took their parts apart), the
 * rest is sent (only the rest: the batch is staged in a Memory table named
 * after its query id and inserted from there where its seq is not stored), a
 * warning line says so, *filled is set and 0 returned. Connections are
 * completed the same way by conn id (staged and counted there: a batch's
 * conn ids are not a range of its own). Hosts: TB__CH_RESEND (a set). A
 * negative code: the server failed (a fill may have stored part); call again
 * later. */
int tb__ch_settle(struct tb_ch *ch, const struct tb__ch_batch *b, bool *filled);
/* The query id of batch no of this handle's run ("tbneck-SENSOR-START-NO"),
 * which also names its staging table. */
void tb__ch_batch_id(const struct tb_ch *ch, uint64_t no, char *buf, size_t n);
/* Whether name is one of sensor's staging tables (tb__ch_batch_id's form). */
bool tb__ch_is_staging(const char *name, const char *sensor);
/* Drops the staging table of query_id if there (best effort: a fill that
 * never succeeded). */
void tb__ch_drop_staging(struct tb_ch *ch, const char *query_id);
/* Runs sql (one UInt64 column, FORMAT RowBinary) and returns its first value. */
int tb__ch_count(struct tb_ch *ch, const char *sql, uint64_t *n);
/* Bounds each request to ms (connecting to at most 10 s of it); default none. */
void tb__ch_set_timeout(struct tb_ch *ch, long ms);
const char *tb__ch_sensor(const struct tb_ch *ch);
const char *tb__ch_db(const struct tb_ch *ch);
const char *tb__ch_where(const struct tb_ch *ch);

#endif
