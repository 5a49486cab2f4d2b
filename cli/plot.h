/* SPDX-License-Identifier: MIT */
/* plot.h — draws a report with gnuplot (a runtime dependency found on PATH and
 * driven over a pipe) as one multi-panel PNG or SVG. */
#ifndef TB_PLOT_H
#define TB_PLOT_H

#include "analyze.h"

enum tb_plot_fmt { TB_PLOT_PNG, TB_PLOT_SVG };

/* The format implied by the file name (".png" / ".svg", any case); -1 when
 * neither. */
int tb_plot_format(const char *path);

/* Absolute path of `prog` on $PATH into buf; TB_E_NOTFOUND when absent. */
int tb_plot_find(const char *prog, char *buf, size_t len);

/* Writes the gnuplot script drawing `r` into `path` (data inline) to f.
 * Separate from running gnuplot so tests can check what is drawn. */
int tb_plot_script(FILE *f, const struct tb_report *r, const struct tb_catalog *cat,
                   const char *path, enum tb_plot_fmt fmt);

/* Runs gnuplot on the script. TB_E_NOTFOUND when gnuplot is not on PATH; other
 * failures leave one line in errbuf. */
int tb_plot_report(const struct tb_report *r, const struct tb_catalog *cat, const char *path,
                   char *errbuf, size_t errlen);

#endif
