/* SPDX-License-Identifier: MIT */
/* live.c — libpcap live capture driven by a libuv poll handle. */
#include "live.h"
#include "live-int.h"

#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One readable event drains at most this many pcap_dispatch calls, so a flood
 * cannot starve the loop's timers (health, windows) and the web server. */
#define DRAIN_MAX_CALLS 64
#define DISPATCH_BATCH 4096
/* Without immediate mode the kernel hands over a block when it is full or
 * this old; 100 ms keeps the live stream fresh without waking per packet. */
#define BLOCK_TIMEOUT_MS 100

struct tb_live {
    uv_poll_t poll;
    pcap_t *pcap;
    tb_live_packet_cb cb;
    void *ud;
    int linktype;
    bool polling, closing;
    bool behind; /* the last drain stopped at its cap with packets left */
    /* pcap_stats counters are 32-bit and wrap; these keep the 64-bit sums. */
    uint32_t last_recv, last_drop, last_ifdrop;
    struct tb_live_stats total;
};

static void on_packet(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes)
{
    struct tb_live *l = (struct tb_live *)user;
    /* The device was opened with nanosecond precision: tv_usec holds ns. */
    int64_t ts = (int64_t)h->ts.tv_sec * TB_NS_PER_SEC + (int64_t)h->ts.tv_usec;
    l->cb(l->ud, l->linktype, ts, bytes, h->caplen, h->len);
}

int tb_live_drain(struct tb_live *l)
{
    if (l->closing)
        return 0;
    int total = 0;
    l->behind = true;
    for (int i = 0; i < DRAIN_MAX_CALLS; i++) {
        int n = pcap_dispatch(l->pcap, DISPATCH_BATCH, on_packet, (u_char *)l);
        if (n < 0) {
            if (n == PCAP_ERROR_BREAK)
                break;
            return TB_E_PCAP;
        }
        if (n == 0) {
            l->behind = false;
            break;
        }
        total += n;
    }
    return total;
}

bool tb_live_behind(const struct tb_live *l)
{
    return l->behind;
}

int64_t tb_live_clock(int64_t clock_ns, int64_t last_pkt_ns, int64_t wall_ns, bool idle)
{
    int64_t c = TB_MAX(clock_ns, last_pkt_ns);
    return idle ? TB_MAX(c, wall_ns - TB_LIVE_CLOCK_LAG_NS) : c;
}

static void on_readable(uv_poll_t *p, int status, int events)
{
    struct tb_live *l = p->data;
    (void)events;
    if (status < 0)
        return;
    tb_live_drain(l);
}

static int map_activate_error(int rc)
{
    switch (rc) {
    case PCAP_ERROR_NO_SUCH_DEVICE:
        return TB_E_NOTFOUND;
    case PCAP_ERROR_PERM_DENIED:
    case PCAP_ERROR_PROMISC_PERM_DENIED:
        return TB_E_PERM;
    default:
        return TB_E_PCAP;
    }
}

int tb__live_pcap_open(pcap_t **out, const struct tb_live_opts *o, char *errbuf, size_t errlen)
{
    char perr[PCAP_ERRBUF_SIZE] = "";
    int ret = TB_E_PCAP;
    pcap_t *p = pcap_create(o->iface, perr);
    *out = NULL;
    if (!p) {
        snprintf(errbuf, errlen, "interface '%s': %s", o->iface, perr);
        return TB_E_PCAP;
    }
    pcap_set_snaplen(p, o->snaplen > 0 ? o->snaplen : 262144);
    pcap_set_promisc(p, o->promisc ? 1 : 0);
    pcap_set_timeout(p, BLOCK_TIMEOUT_MS);
    pcap_set_buffer_size(p, (o->bufsize_mib > 0 ? o->bufsize_mib : 64) << 20);
    if (o->immediate)
        pcap_set_immediate_mode(p, 1);
    /* Nanosecond stamps where the kernel has them; microseconds scaled up
     * otherwise (set_tstamp_precision fails and stamps stay in us). */
    bool nano = pcap_set_tstamp_precision(p, PCAP_TSTAMP_PRECISION_NANO) == 0;
    int rc = pcap_activate(p);
    if (rc < 0) {
        const char *why = pcap_geterr(p);
        if (rc == PCAP_ERROR_NO_SUCH_DEVICE)
            snprintf(errbuf, errlen, "interface '%s': no such device", o->iface);
        else if (rc == PCAP_ERROR_PERM_DENIED)
            snprintf(errbuf, errlen,
                     "interface '%s': permission denied (run as root or grant CAP_NET_RAW)",
                     o->iface);
        else
            snprintf(errbuf, errlen, "interface '%s': %s", o->iface,
                     why && *why ? why : pcap_statustostr(rc));
        ret = map_activate_error(rc);
        goto fail;
    }
    if (rc > 0)
        fprintf(stderr, "tbneck: warning: interface '%s': %s\n", o->iface, pcap_geterr(p));
    if (!nano || pcap_get_tstamp_precision(p) != PCAP_TSTAMP_PRECISION_NANO) {
        /* Cannot happen on Linux; refuse rather than mis-scale time by 1000. */
        snprintf(errbuf, errlen, "interface '%s': no nanosecond timestamps", o->iface);
        goto fail;
    }
    if (o->bpf && *o->bpf) {
        struct bpf_program prog;
        if (pcap_compile(p, &prog, o->bpf, 1, PCAP_NETMASK_UNKNOWN) < 0) {
            snprintf(errbuf, errlen, "interface '%s': filter '%s': %s", o->iface, o->bpf,
                     pcap_geterr(p));
            ret = TB_E_INVAL;
            goto fail;
        }
        rc = pcap_setfilter(p, &prog);
        pcap_freecode(&prog);
        if (rc < 0) {
            snprintf(errbuf, errlen, "interface '%s': filter: %s", o->iface, pcap_geterr(p));
            goto fail;
        }
    }
    if (pcap_setnonblock(p, 1, perr) < 0) {
        snprintf(errbuf, errlen, "interface '%s': %s", o->iface, perr);
        goto fail;
    }
    *out = p;
    return 0;
fail:
    pcap_close(p);
    return ret;
}

int tb_live_open(struct tb_live **out, uv_loop_t *loop, const struct tb_live_opts *o,
                 tb_live_packet_cb cb, void *ud, char *errbuf, size_t errlen)
{
    struct tb_live *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(errbuf, errlen, "interface '%s': out of memory", o->iface);
        return TB_E_NOMEM;
    }
    l->cb = cb;
    l->ud = ud;
    int ret = tb__live_pcap_open(&l->pcap, o, errbuf, errlen);
    if (ret < 0)
        goto fail;
    ret = TB_E_PCAP;
    l->linktype = pcap_datalink(l->pcap);
    int fd = pcap_get_selectable_fd(l->pcap);
    if (fd < 0) {
        snprintf(errbuf, errlen, "interface '%s': no selectable descriptor", o->iface);
        goto fail;
    }
    if (uv_poll_init(loop, &l->poll, fd) < 0) {
        snprintf(errbuf, errlen, "interface '%s': cannot watch its descriptor", o->iface);
        goto fail;
    }
    l->poll.data = l;
    *out = l;
    return 0;
fail:
    if (l->pcap)
        pcap_close(l->pcap);
    free(l);
    return ret;
}

int tb_live_start(struct tb_live *l)
{
    if (l->polling)
        return 0;
    if (uv_poll_start(&l->poll, UV_READABLE, on_readable) < 0)
        return TB_E_IO;
    l->polling = true;
    return 0;
}

int tb_live_linktype(const struct tb_live *l)
{
    return l->linktype;
}

int tb_live_stats(struct tb_live *l, struct tb_live_stats *s)
{
    struct pcap_stat ps;
    if (!l->closing && pcap_stats(l->pcap, &ps) == 0) {
        /* Unsigned subtraction absorbs one wrap of the 32-bit counters. */
        l->total.received += (uint32_t)(ps.ps_recv - l->last_recv);
        l->total.kernel_drops += (uint32_t)(ps.ps_drop - l->last_drop);
        l->total.if_drops += (uint32_t)(ps.ps_ifdrop - l->last_ifdrop);
        l->last_recv = ps.ps_recv;
        l->last_drop = ps.ps_drop;
        l->last_ifdrop = ps.ps_ifdrop;
    }
    *s = l->total;
    return 0;
}

static void on_closed(uv_handle_t *h)
{
    struct tb_live *l = h->data;
    pcap_close(l->pcap);
    free(l);
}

void tb_live_close(struct tb_live *l)
{
    if (!l || l->closing)
        return;
    l->closing = true;
    /* The descriptor belongs to pcap: it is closed after libuv let go of it. */
    uv_close((uv_handle_t *)&l->poll, on_closed);
}

/* tcpdump's words for the flags and the connection status of a device. */
static void print_flags(FILE *out, bpf_u_int32 fl)
{
    static const struct {
        bpf_u_int32 bit;
        const char *name;
    } names[] = {{PCAP_IF_UP, "Up"},
                 {PCAP_IF_RUNNING, "Running"},
                 {PCAP_IF_LOOPBACK, "Loopback"},
                 {PCAP_IF_WIRELESS, "Wireless"}};
    bool any = false;
    for (size_t i = 0; i < TB_ARRAY_SIZE(names); i++) {
        if (fl & names[i].bit) {
            fprintf(out, "%s%s", any ? ", " : "", names[i].name);
            any = true;
        }
    }
    if (!any)
        fputs("none", out);
    bool wireless = fl & PCAP_IF_WIRELESS;
    switch (fl & PCAP_IF_CONNECTION_STATUS) {
    case PCAP_IF_CONNECTION_STATUS_UNKNOWN:
        fputs(wireless ? ", Association status unknown" : ", Connection status unknown", out);
        break;
    case PCAP_IF_CONNECTION_STATUS_CONNECTED:
        fputs(wireless ? ", Associated" : ", Connected", out);
        break;
    case PCAP_IF_CONNECTION_STATUS_DISCONNECTED:
        fputs(wireless ? ", Not associated" : ", Disconnected", out);
        break;
    default:
        break;
    }
}

int tb_live_list(FILE *out, char *errbuf, size_t errlen)
{
    char perr[PCAP_ERRBUF_SIZE] = "";
    pcap_if_t *devs = NULL;
    if (pcap_findalldevs(&devs, perr) != 0) {
        snprintf(errbuf, errlen, "cannot list the interfaces: %s", perr);
        return TB_E_PCAP;
    }
    if (!devs) {
        snprintf(errbuf, errlen, "no interfaces to capture on (permissions?)");
        return TB_E_PCAP;
    }
    int i = 1;
    for (const pcap_if_t *d = devs; d; d = d->next, i++) {
        fprintf(out, "%d.%s", i, d->name);
        if (d->description)
            fprintf(out, " (%s)", d->description);
        if (d->flags) {
            fputs(" [", out);
            print_flags(out, d->flags);
            fputc(']', out);
        }
        fputc('\n', out);
    }
    pcap_freealldevs(devs);
    return fflush(out) == 0 && !ferror(out) ? 0 : TB_E_IO;
}
