/* SPDX-License-Identifier: MIT */
/* ps.c — a processor-sharing server: c cores shared by n active requests. */
#include <math.h>
#include <stdlib.h>

#include "sim.h"
#include "util.h"

/* Work left below this many nanoseconds counts as done: the completion time is
 * rounded up to a whole nanosecond, so floating error is far smaller. */
#define DONE_EPS 0.5

static double rate(const struct sim_ps *ps)
{
    if (ps->frozen || ps->n == 0)
        return 0.0;
    double share = ps->n > (size_t)ps->cores ? (double)ps->cores / (double)ps->n : 1.0;
    return share * ps->speed;
}

void sim_ps_init(struct sim_ps *ps, int cores, double speed, int64_t now)
{
    *ps = (struct sim_ps){.v = 0.0, .last_ns = now, .speed = speed, .cores = cores};
}

void sim_ps_free(struct sim_ps *ps)
{
    free(ps->jobs);
    ps->jobs = NULL;
    ps->n = ps->cap = 0;
}

void sim_ps_advance(struct sim_ps *ps, int64_t now)
{
    if (now <= ps->last_ns)
        return;
    double dt = (double)(now - ps->last_ns);
    ps->v += rate(ps) * dt;
    if (!ps->frozen && ps->n)
        ps->busy_core_ns += dt * (double)TB_MIN(ps->n, (size_t)ps->cores) / ps->cores;
    ps->last_ns = now;
}

int sim_ps_add(struct sim_ps *ps, int64_t now, double work_ns, void *ud)
{
    sim_ps_advance(ps, now);
    int rc = tb_grow(&ps->jobs, &ps->cap, ps->n + 1, sizeof *ps->jobs);
    if (rc)
        return rc;
    ps->jobs[ps->n++] = (struct sim_ps_job){.tag = ps->v + (work_ns > 0 ? work_ns : 0), .ud = ud};
    return 0;
}

void sim_ps_set_speed(struct sim_ps *ps, int64_t now, double speed)
{
    sim_ps_advance(ps, now);
    ps->speed = speed;
}

void sim_ps_set_frozen(struct sim_ps *ps, int64_t now, bool frozen)
{
    sim_ps_advance(ps, now);
    ps->frozen = frozen;
}

int64_t sim_ps_next(const struct sim_ps *ps, int64_t now)
{
    if (ps->n == 0 || ps->frozen)
        return INT64_MAX;
    double r = rate(ps);
    if (r <= 0)
        return INT64_MAX;
    double min = ps->jobs[0].tag;
    for (size_t i = 1; i < ps->n; i++)
        if (ps->jobs[i].tag < min)
            min = ps->jobs[i].tag;
    /* The clock may lag now when nothing changed since; account for it. */
    double vnow = ps->v + r * (double)(now - ps->last_ns);
    double left = min - vnow;
    if (left <= DONE_EPS)
        return now;
    return now + (int64_t)ceil(left / r);
}

void *sim_ps_pop_done(struct sim_ps *ps)
{
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < ps->n; i++) {
        if (ps->jobs[i].tag - ps->v > DONE_EPS)
            continue;
        if (best == SIZE_MAX || ps->jobs[i].tag < ps->jobs[best].tag)
            best = i;
    }
    if (best == SIZE_MAX)
        return NULL;
    void *ud = ps->jobs[best].ud;
    /* Keep admission order among the rest: ties then leave first-in first-out. */
    for (size_t i = best + 1; i < ps->n; i++)
        ps->jobs[i - 1] = ps->jobs[i];
    ps->n--;
    return ud;
}
