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

/* Runs `prog` (found on PATH) with `args`, writing its input with write(f,
 * ud), and checks that it produced a non-empty `path` (removed first, so a
 * stale file never passes). TB_E_NOTFOUND when prog is not installed (errbuf
 * names the Debian package); other failures one line in errbuf. */
int tb_plot_run(const char *prog, const char *const *args, size_t nargs,
                int (*write)(FILE *f, void *ud), void *ud, const char *path, char *errbuf,
                size_t errlen);

/* ---- diagnose (plot_diag.c) ----------------------------------------------------
 * tb_plot_diagnosis draws `path` (gnuplot: per tier the self and waiting load
 * stacked over time, the front tier's congested windows shaded and each
 * window's root marked by cause) and, beside it, the wait-for graph with
 * Graphviz dot: tb_plot_graph_path() names that file (FILE-graph.EXT). The
 * script and the DOT text are written by functions of their own so tests can
 * check what is drawn. */
struct tb_diagnosis;
int tb_plot_diag_script(FILE *f, const struct tb_diagnosis *d, const struct tb_catalog *cat,
                        const char *path, enum tb_plot_fmt fmt);
int tb_plot_diag_dot(FILE *f, const struct tb_diagnosis *d, const struct tb_catalog *cat);
void tb_plot_graph_path(const char *path, char *buf, size_t len);
int tb_plot_diagnosis(const char *path, const struct tb_catalog *cat,
                      const struct tb_diagnosis *d, char *errbuf, size_t errlen);
/* The critical path as stacked bars per class (mean, p95, p99 requests), the
 * third picture of diagnose --plot: FILE-path.EXT (tb_plot_path_suffix). */
struct tb_critpath;
int tb_plot_critpath_script(FILE *f, const struct tb_critpath *cp, const struct tb_catalog *cat,
                            const char *path, enum tb_plot_fmt fmt);
void tb_plot_path_suffix(const char *path, const char *suffix, char *buf, size_t len);

#endif
