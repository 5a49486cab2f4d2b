/* SPDX-License-Identifier: MIT */
/* json.h — the one JSON encoder: every JSON tbneck writes (report, events
 * report, the dashboard's API and stream) goes through these, so a document
 * is valid whatever the wire put into a class or a path.
 *
 * Strings: quotes and backslashes escaped; \b \f \n \r \t as such; every
 * other byte below 0x20, and 0x7f, as \u00XX; well-formed UTF-8 (shortest
 * form, no surrogates, at most U+10FFFF) copied; each byte that does not
 * start or belong to such a sequence becomes \ufffd (U+FFFD). NULL is "".
 * Numbers: %.17g (reads back as the same double), NaN and infinities (an
 * undetermined N*) as null; integers as themselves. */
#ifndef TB_JSON_H
#define TB_JSON_H

#include <stdio.h>

#include "tb.h"
#include "buf.h"

void tb_buf_json_str(struct tb_buf *b, const char *s);
void tb_buf_json_num(struct tb_buf *b, double v);
void tb_buf_json_i64(struct tb_buf *b, int64_t v);

/* A member: its text as given (a literal holding the separator, the quoted
 * name and the colon, in the caller's spacing: ",\"load\":"), then the
 * value as above. */
void tb_buf_json_knum(struct tb_buf *b, const char *key, double v);
void tb_buf_json_ki64(struct tb_buf *b, const char *key, int64_t v);
void tb_buf_json_kstr(struct tb_buf *b, const char *key, const char *s);

/* The same onto a stream (errors show in ferror(f)). */
void tb_json_str(FILE *f, const char *s);
void tb_json_num(FILE *f, double v);

#endif
