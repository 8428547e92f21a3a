/* Ember fast engine runtime: the cache model, DRAM booking and output queue of the reference engine
 * (ember/sim/cache.py, queue.py), transcribed to C.  Every generated program includes this text, so
 * the compiled program calls them without leaving machine code.  A condition the reference reports
 * as an error returns a negative time; the engine then lets the reference engine word the error.
 * Compiled without fast-math and without FP contraction: the arithmetic must round as Python's does. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The structures engine.py shares with this code are mirrored field for field by ctypes classes in boundary.py;
 * the compiled program reports their layout (ember_layout) and the engine refuses it if any field differs. */
typedef struct {                 /* one cache level (machine.caches[k]) */
    int64_t sets, ways, line_bytes;
    double latency;              /* the latency it adds */
    int64_t *tags; double *rdy;  /* per set s, from tags + s * (ways + 1): the number of lines held, then the lines
                                    most recent first (each line * 2 + dirty); from rdy + s * ways their arrival
                                    times.  The count and the most recent line share a host cache line, so a
                                    repeated access touches one. */
    int64_t hits, misses, bytes; /* counted: hits, misses, bytes filled */
} Level;

typedef struct {                 /* one calendar of a DRAM resource (dram.Calendar): sorted disjoint intervals */
    double *start, *end;
    int64_t n, cap, grown;       /* how many, room for how many; whether start and end are this runtime's (grown
                                    by channel_grow: the engine frees them) or the engine's */
} Channel;

typedef struct {                 /* banked DRAM (dram.BankedDram): its organization, timings in core cycles, each
                                    bank's state, and its counters */
    int64_t ranks, groups, banks, lines_per_row, mop;  /* mop: the mop4-xor address map, else row-bank-rank-column */
    double cl, cwl, rcd, rp, ras, rc, wr, rtp, ccd_l, rrd_l, act_width, refi, rfc, write_burst;
    int64_t *row; double *act, *pre_ok, *act_ok;  /* per bank: open row (-1 closed), its activate, earliest
                                    precharge, earliest next activate */
    double activates, hits, misses, conflicts;
} Banks;

typedef double (*SyncFn)(int64_t, double);

/* The timeline (trace.py, Events): events kept in the engine's arrays, in the reference's order.  The kinds are
 * trace.KINDS in order, the waits in pipeline.CATEGORIES' order; the tracks are trace.py's ACCESS .. DRAM. */
enum { TK_RUN, TK_QUEUE_FULL, TK_QUEUE_BYTES, TK_CALLBACK, TK_HOST, TK_BRANCH_MISS, TK_DISPATCH_MISS, TK_WAIT,
       TK_DRAM_READ = TK_WAIT + 6, TK_DRAM_WRITE };
enum { TRACK_ACCESS, TRACK_QUEUE, TRACK_CORE, TRACK_WAITS, TRACK_DRAM };
typedef struct {
    int64_t n, cap, dropped;     /* kept, room, not kept for want of room */
    double lo, hi;               /* the window: an event wholly outside it is not kept */
    int64_t *kind, *track; double *t0, *t1, *val;
    int64_t *last; double *lastv;  /* per track: its latest event kept (-1: none), its counter's last value */
} Trace;

/* trace.Events.add: keep an event; its index, -1 if not kept.  `merge`: a span of the same kind starting where the
 * track's latest one ends extends it. */
static int64_t tr_add(Trace *r, int64_t kind, int64_t track, double a, double b, double v, int merge) {
    if (b < r->lo || a > r->hi) return -1;
    int64_t j = r->last[track];
    if (merge && j >= 0 && r->kind[j] == kind && r->t1[j] == a) { r->t1[j] = b; return j; }
    if (r->n == r->cap) { r->dropped += 1; return -1; }
    j = r->n++;
    r->kind[j] = kind; r->track[j] = track; r->t0[j] = a; r->t1[j] = b; r->val[j] = v;
    r->last[track] = j;
    return j;
}
/* trace.Events.count: a counter's value at t, kept only when it changed. */
static void tr_count(Trace *r, int64_t kind, int64_t track, double t, double v) {
    if (r->lastv[track] != v && tr_add(r, kind, track, t, t, v, 0) >= 0) r->lastv[track] = v;
}

typedef struct {
    int64_t nlev; Level *lv;
    int64_t nch; Channel *ch;    /* DRAM channels (line n is channel n % nch's); ch holds every calendar: the nch
                                    buses, then (banked DRAM) each rank's activates, each bank group's activates,
                                    each bank group's column commands, each bank's sessions */
    double dram_latency, line_time, line_share;  /* DRAM's latency, a line's time on its channel, and its share of
                                    the whole DRAM's cycles */
    double dram_requests, dram_bytes, dram_busy, dram_write_bytes;  /* counted */
    double dram_end;             /* end of the last transfer */
    Banks *bk;                   /* NULL: ideal DRAM */
    double q_end;                /* the end of this core's round (rounds.py; INFINITY: one core) */
    int64_t core;                /* this core's number among those that share the last level and the DRAM */
    SyncFn sync;                 /* rounds.Rounds.sync: waits for the core's next turn, returns its round's end */
    Trace *tr;                   /* the timeline, NULL when the run is not traced */
} Mem;

/* rounds.py: a call on the shared memory at or past the end of the core's round waits for its next turn. */
static inline void mem_turn(Mem *m, double t) {
    if (t >= m->q_end) m->q_end = m->sync(m->core, t);
}

/* Twice the room for a calendar's bookings, kept in place at the start of its new room. */
static int channel_grow(Channel *c) {
    int64_t cap = c->cap * 2;
    size_t bytes = (size_t)cap * sizeof(double);
    double *start = malloc(bytes), *end = malloc(bytes);
    if (!start || !end) { free(start); free(end); return -1; }
    memcpy(start, c->start, (size_t)c->n * sizeof(double));
    memcpy(end, c->end, (size_t)c->n * sizeof(double));
    if (c->grown) { free(c->start); free(c->end); }
    c->start = start; c->end = end; c->cap = cap; c->grown = 1;
    return 0;
}

/* dram.Calendar.first_free: the earliest start >= now of `x` cycles overlapping no booking. */
static double cal_free(const Channel *c, double now, double x) {
    const double *ds = c->start, *de = c->end;
    int64_t n = c->n, lo = 0, hi = n;  /* first interval ending after now (bisect_right on ends) */
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (now < de[mid]) hi = mid; else lo = mid + 1; }
    double t = now;
    for (int64_t i = lo; i < n && ds[i] < t + x; i++) if (de[i] > t) t = de[i];
    return t;
}

/* dram.Calendar.take: book [t, t + x), found free, merged with the intervals it touches (< 0: no room). */
static int cal_take(Channel *c, double t, double x) {
    if (c->n + 2 > c->cap && channel_grow(c) < 0) return -1;
    double *ds = c->start, *de = c->end;
    int64_t n = c->n, lo = 0, hi = n;
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (t < de[mid]) hi = mid; else lo = mid + 1; }
    int64_t i = lo;
    if (i > 0 && de[i - 1] == t) {
        de[i - 1] = t + x;
        if (i < n && ds[i] == t + x) {
            de[i - 1] = de[i];
            memmove(ds + i, ds + i + 1, (size_t)(n - i - 1) * sizeof(double));
            memmove(de + i, de + i + 1, (size_t)(n - i - 1) * sizeof(double));
            c->n = n - 1;
        }
    } else if (i < n && ds[i] == t + x) {
        ds[i] = t;
    } else {
        memmove(ds + i + 1, ds + i, (size_t)(n - i) * sizeof(double));
        memmove(de + i + 1, de + i, (size_t)(n - i) * sizeof(double));
        ds[i] = t; de[i] = t + x;
        c->n = n + 1;
    }
    return 0;
}

/* dram.Calendar.book on channel `ch`'s bus (ideal DRAM): every booking is kept, as the reference keeps them (a
 * request may come earlier in simulated time than one already booked, so none can be known never to matter). */
static double book(Mem *m, int64_t ch, double now) {
    Channel *c = &m->ch[ch];
    double t = cal_free(c, now, m->line_time);
    return cal_take(c, t, m->line_time) < 0 ? -1.0 : t;
}

/* dram.BankedDram.outside_refresh and refresh_after */
static inline double outside_refresh(const Banks *b, double t) {
    double k = floor(t / b->refi);
    return (k >= 1.0 && t < k * b->refi + b->rfc) ? k * b->refi + b->rfc : t;
}
static inline double refresh_after(const Banks *b, double t) { return (floor(t / b->refi) + 1.0) * b->refi; }

/* dram.BankedDram.precharge_after and close_for_refresh */
static inline double precharge_after(const Mem *m, double c, int write) {
    const Banks *bk = m->bk;
    return write ? c + bk->cwl + m->line_time + bk->wr : c + bk->rtp;
}
static inline void close_for_refresh(Banks *bk, int64_t b) {
    bk->row[b] = -1;
    double r = outside_refresh(bk, refresh_after(bk, bk->act[b]));
    if (r > bk->act_ok[b]) bk->act_ok[b] = r;
}

/* dram.BankedDram.column and activate */
static double bank_column(const Mem *m, double t, const Channel *bus, const Channel *cols, double delay,
                          double width, double *data) {
    for (;;) {
        double c = outside_refresh(m->bk, t);
        c = cal_free(cols, c, m->bk->ccd_l);
        double d = cal_free(bus, c + delay, width);
        if (d != c + delay) c = d - delay;
        if (c == t) { *data = d; return c; }
        t = c;
    }
}
static double bank_activate(const Banks *b, double t, const Channel *ranks, const Channel *groups) {
    for (;;) {
        double a = outside_refresh(b, t);
        a = cal_free(ranks, a, b->act_width);
        a = cal_free(groups, a, b->rrd_l);
        if (a == t) return a;
        t = a;
    }
}

/* dram.BankedDram.earlier: a row opened for this request alone before bank b's latest one; its column command,
 * -1 when no gap of the bank's fits it, -2 when a booking found no room. */
static double bank_earlier(Mem *m, double now, int64_t b, Channel *racts, Channel *gacts, Channel *bus, Channel *cols,
                           Channel *sessions, double delay, double width, int write, double *data) {
    Banks *bk = m->bk;
    double limit = bk->act[b] - bk->rp, g = cal_free(sessions, now, bk->rp + bk->ras);
    if (g + bk->rp + bk->ras > limit) return -1.0;
    double a = bank_activate(bk, outside_refresh(bk, g) + bk->rp, racts, gacts);
    double c = bank_column(m, a + bk->rcd, bus, cols, delay, width, data);
    double used = precharge_after(m, c, write), end = a + bk->ras;
    if (a + bk->rc - bk->rp > end) end = a + bk->rc - bk->rp;
    if (used > end) end = used;
    if (end > limit || c >= refresh_after(bk, a) || cal_free(sessions, a - bk->rp, end - a + bk->rp) != a - bk->rp)
        return -1.0;
    if (cal_take(racts, a, bk->act_width) < 0 || cal_take(gacts, a, bk->rrd_l) < 0
        || cal_take(sessions, a - bk->rp, end - a + bk->rp) < 0) return -2.0;
    bk->activates += 1.0;
    bk->conflicts += 1.0;
    return c;
}

/* dram.BankedDram.transfer: the start on the bus of `line`'s data, requested at `now` (< 0: no room). */
static double banked_transfer(Mem *m, double now, int64_t line, int write) {
    Banks *bk = m->bk;
    int64_t nch = m->nch, ch = line % nch, n = line / nch;  /* dram.BankedDram.place and decode */
    int64_t col = n % (bk->mop ? 4 : bk->lines_per_row);
    n /= bk->mop ? 4 : bk->lines_per_row;
    int64_t rank = n % bk->ranks; n /= bk->ranks;
    int64_t group = n % bk->groups; n /= bk->groups;
    int64_t bank = n % bk->banks; n /= bk->banks;
    if (bk->mop) {
        int64_t rest = bk->lines_per_row / 4;
        col += n % rest * 4; n /= rest;
        int64_t x = col;
        if (bk->ranks > 1) { rank ^= x % bk->ranks; x /= bk->ranks; }
        group ^= x % bk->groups; x /= bk->groups;
        bank ^= x % bk->banks; x /= bk->banks;
        n ^= x;
    }
    int64_t row = n, rk = ch * bk->ranks + rank, rg = rk * bk->groups + group, b = rg * bk->banks + bank;
    int64_t nrank = nch * bk->ranks, ngroup = nrank * bk->groups;
    Channel *bus = &m->ch[ch], *racts = &m->ch[nch + rk], *gacts = &m->ch[nch + nrank + rg],
            *cols = &m->ch[nch + nrank + ngroup + rg], *sessions = &m->ch[nch + nrank + 2 * ngroup + b];
    double delay = write ? bk->cwl : bk->cl, width = write ? bk->write_burst : m->line_time, c = -1.0, data = -1.0;
    if (bk->row[b] >= 0 && now < bk->act[b] - bk->rp) {
        c = bank_earlier(m, now, b, racts, gacts, bus, cols, sessions, delay, width, write, &data);
        if (c < -1.5) return -1.0;
        if (c >= 0.0) {
            if (cal_take(cols, c, bk->ccd_l) < 0 || cal_take(bus, data, width) < 0) return -1.0;
            return data;
        }
    }
    if (bk->row[b] == row) {
        double e = bk->act[b] + bk->rcd;
        c = bank_column(m, now > e ? now : e, bus, cols, delay, width, &data);
        if (c >= refresh_after(bk, bk->act[b])) {
            close_for_refresh(bk, b);
            c = -1.0;
        }
    }
    if (c < 0.0) {
        if (bk->row[b] >= 0 && refresh_after(bk, bk->act[b]) <= (now > bk->act_ok[b] ? now : bk->act_ok[b]))
            close_for_refresh(bk, b);
        double start = now > bk->act_ok[b] ? now : bk->act_ok[b], a;
        if (bk->row[b] >= 0) {
            bk->conflicts += 1.0;
            double p = outside_refresh(bk, now > bk->pre_ok[b] ? now : bk->pre_ok[b]);
            if (p + bk->rp > start) start = p + bk->rp;
        } else {
            bk->misses += 1.0;
        }
        for (;;) {
            a = bank_activate(bk, start, racts, gacts);
            c = bank_column(m, a + bk->rcd, bus, cols, delay, width, &data);
            if (c < refresh_after(bk, a)) break;
            start = outside_refresh(bk, refresh_after(bk, a));
        }
        if (cal_take(racts, a, bk->act_width) < 0 || cal_take(gacts, a, bk->rrd_l) < 0) return -1.0;
        bk->activates += 1.0;
        bk->row[b] = row; bk->act[b] = a; bk->pre_ok[b] = a + bk->ras;
        bk->act_ok[b] = a + bk->rc;
    } else {
        bk->hits += 1.0;
    }
    if (cal_take(cols, c, bk->ccd_l) < 0 || cal_take(bus, data, width) < 0) return -1.0;
    double done = precharge_after(m, c, write);
    if (done > bk->pre_ok[b]) bk->pre_ok[b] = done;
    double start = bk->act[b] - bk->rp, end = bk->pre_ok[b];  /* the latest session, from its precharge */
    if (bk->act[b] + bk->rc - bk->rp > end) end = bk->act[b] + bk->rc - bk->rp;  /* tRC to the next activate */
    if (sessions->n > 0 && sessions->end[sessions->n - 1] > start) {
        if (end > sessions->end[sessions->n - 1]) sessions->end[sessions->n - 1] = end;
    } else if (cal_take(sessions, start, end - start) < 0) {
        return -1.0;
    }
    return data;
}

/* Set index of a line at a level: a mask when the set count is a power of two. */
static inline int64_t set_of(const Level *l, int64_t line) {
    int64_t sets = l->sets;
    return (sets & (sets - 1)) == 0 ? (line & (sets - 1)) : line % sets;
}

/* Set of `line` at level k: its tags (the count, then the lines) and their arrival times (see Level). */
static inline int64_t *set_tags(Mem *m, int64_t k, int64_t line) {
    const Level *l = &m->lv[k];
    return l->tags + set_of(l, line) * (l->ways + 1);
}
static inline double *set_rdy(Mem *m, int64_t k, int64_t line) {
    const Level *l = &m->lv[k];
    return l->rdy + set_of(l, line) * l->ways;
}
static inline int64_t find_line(const int64_t *tg, int64_t line) {
    for (int64_t j = 0; j < tg[0]; j++) if ((tg[1 + j] >> 1) == line) return j;
    return -1;
}
static inline int mem_contains(Mem *m, int64_t k, int64_t line) {
    return find_line(set_tags(m, k, line), line) >= 0;
}

/* cache.MemorySystem.transfer: `line` to or from DRAM on its channel; returns its start (negative: out of
 * slots). */
static double transfer(Mem *m, double now, int64_t line, int write) {
    double start = m->bk ? banked_transfer(m, now, line, write) : book(m, m->nch == 1 ? 0 : line % m->nch, now);
    if (start < 0.0) return -1.0;
    if (m->tr)  /* trace.Events.burst: a banked write holds the bus for its burst and its share of turnarounds */
        tr_add(m->tr, write ? TK_DRAM_WRITE : TK_DRAM_READ, TRACK_DRAM + line % m->nch, start,
               start + (write && m->bk ? m->bk->write_burst : m->line_time), 0.0, 1);
    m->dram_requests += 1.0; m->dram_bytes += (double)m->lv[0].line_bytes; m->dram_busy += m->line_share;
    if (start + m->line_time > m->dram_end) m->dram_end = start + m->line_time;
    return start;
}

/* cache.MemorySystem.fill: the line becomes level k's most recent (tag carries its dirty bit); a dirty
 * victim is written back at t to the next level, or to DRAM from the last.  Returns 0, or -1 on failure. */
static int mem_fill(Mem *m, int64_t k, int64_t tag, double ready, double t) {
    int64_t ways = m->lv[k].ways, line = tag >> 1;
    int64_t *tg = set_tags(m, k, line);
    double *rd = set_rdy(m, k, line);
    int64_t victim = tg[0] == ways ? tg[ways] : -1;  /* the least recently used line of a full set */
    int64_t n = tg[0] < ways ? tg[0] : ways - 1;
    memmove(tg + 2, tg + 1, (size_t)n * sizeof(int64_t));
    memmove(rd + 1, rd, (size_t)n * sizeof(double));
    tg[1] = tag; rd[0] = ready;
    tg[0] = n + 1;
    if (victim < 0 || !(victim & 1)) return 0;
    if (k + 1 == m->nlev) {
        if (transfer(m, t, victim >> 1, 1) < 0.0) return -1;
        m->dram_write_bytes += (double)m->lv[0].line_bytes;
        return 0;
    }
    int64_t vline = victim >> 1, *otg = set_tags(m, k + 1, vline), pos = find_line(otg, vline);
    if (pos < 0) return mem_fill(m, k + 1, vline * 2 + 1, t, t);
    otg[1 + pos] |= 1;
    return 0;
}

static double mem_access(Mem *m, int64_t addr, double t, int64_t first, int write) {
    mem_turn(m, t);
    int64_t nlev = m->nlev, lb = m->lv[0].line_bytes;
    int64_t line = lb == 64 ? addr >> 6 : addr / lb;
    double now = t, done = 0.0;
    int64_t last = nlev;
    for (int64_t k = first; k < nlev; k++) {
        now = now + m->lv[k].latency;
        int64_t *tg = set_tags(m, k, line);
        double *rd = set_rdy(m, k, line);
        int64_t pos = find_line(tg, line);
        if (pos >= 0) {
            double r = rd[pos];
            int64_t tag = tg[1 + pos];
            if (pos > 0) {
                memmove(tg + 2, tg + 1, (size_t)pos * sizeof(int64_t));
                memmove(rd + 1, rd, (size_t)pos * sizeof(double));
                tg[1] = tag; rd[0] = r;
            }
            m->lv[k].hits += 1;
            done = r > now ? r : now;
            last = k;
            break;
        }
        m->lv[k].misses += 1;
    }
    if (last == nlev) {
        double start = transfer(m, now, line, 0);
        if (start < 0.0) return -1.0;
        done = start + m->dram_latency + m->line_time;
    }
    for (int64_t k = first; k < last; k++) {
        m->lv[k].bytes += m->lv[k].line_bytes;
        if (mem_fill(m, k, line * 2, done, t) < 0) return -1.0;
    }
    if (write) set_tags(m, first, line)[1] |= 1;  /* the line is level first's most recent */
    return done;
}

/* cache.MemorySystem.place: lines the access unit wrote into level k (its queue); victims leave at t. */
/* cache.CacheLevel.drop: level k forgets the line, dirty or not (nothing is written back). */
static void mem_drop(Mem *m, int64_t k, int64_t line) {
    int64_t *tg = set_tags(m, k, line), pos = find_line(tg, line);
    if (pos < 0) return;
    double *rd = set_rdy(m, k, line);
    memmove(tg + 1 + pos, tg + 2 + pos, (size_t)(tg[0] - pos - 1) * sizeof(int64_t));
    memmove(rd + pos, rd + pos + 1, (size_t)(tg[0] - pos - 1) * sizeof(double));
    tg[0] -= 1;
}
/* cache.MemorySystem.write_around: a non-temporal store's line leaves every level and is written to DRAM from
 * t, counted as a write; returns when its transfer ends (< 0: no room for the booking). */
static double mem_write_around(Mem *m, int64_t addr, double t) {
    mem_turn(m, t);
    int64_t lb = m->lv[0].line_bytes, line = addr / lb;
    for (int64_t k = 0; k < m->nlev; k++) mem_drop(m, k, line);
    double start = transfer(m, t, line, 1);
    if (start < 0.0) return -1.0;
    m->dram_write_bytes += (double)lb;
    return start + m->line_time;
}
static int mem_place(Mem *m, int64_t addr, int64_t nbytes, int64_t k, double ready, double t) {
    mem_turn(m, t);
    int64_t lb = m->lv[0].line_bytes, lo = addr / lb, hi = (addr + (nbytes > 1 ? nbytes : 1) - 1) / lb;
    for (int64_t line = lo; line <= hi; line++) {
        for (int64_t j = 0; j < k; j++) mem_drop(m, j, line);
        int64_t *tg = set_tags(m, k, line), pos = find_line(tg, line);
        if (pos >= 0) {
            double *rd = set_rdy(m, k, line);
            memmove(tg + 2, tg + 1, (size_t)pos * sizeof(int64_t));
            memmove(rd + 1, rd, (size_t)pos * sizeof(double));
            tg[1] = line * 2; rd[0] = ready;
        } else if (mem_fill(m, k, line * 2, ready, t) < 0) {
            return -1;
        }
    }
    return 0;
}


typedef struct {
    int64_t head, tail, held, max_bytes, max_entries, cap, mask;
    int64_t *bytes, *hist; double *pop, stall;
    /* An access program that pushes operands without a token (access_code.py, "FIFO mode") keeps every operand
     * here, from its push to the pop that takes it: sequence number, kind (0 integer, 1 float), value, ready. */
    int64_t oph, opt, *ops, *opk, *opi; double *opf, *opr;
    Trace *tr;                   /* the timeline, NULL when the run is not traced */
} Queue;

/* queue.OutputQueue.push: the push time at or after t; the entry's sequence number is q->tail - 1. */
static double q_push(Queue *q, int64_t nbytes, double t) {
    if (nbytes > q->cap) return -1.0;
    double start = t;
    int64_t mask = q->mask;
    while (q->head < q->tail && q->pop[q->head & mask] >= 0.0 && q->pop[q->head & mask] <= t)
        q->held -= q->bytes[q->head++ & mask];
    while (q->held + nbytes > q->cap) {
        double p = q->pop[q->head & mask];
        if (p < 0.0) return -1.0;  /* deadlock: the reference engine explains it */
        if (p > t) t = p;
        q->held -= q->bytes[q->head++ & mask];
    }
    if (q->tail - q->head > mask) return -1.0;  /* more entries than the ring keeps */
    q->bytes[q->tail & mask] = nbytes;
    q->pop[q->tail & mask] = -1.0;
    q->tail++;
    q->held += nbytes;
    q->stall += t - start;
    if (q->tr) {  /* trace.Events.push */
        if (t > start) tr_add(q->tr, TK_QUEUE_FULL, TRACK_ACCESS, start, t, 0.0, 1);
        tr_count(q->tr, TK_QUEUE_BYTES, TRACK_QUEUE, t, (double)q->held);
    }
    if (q->held > q->max_bytes) q->max_bytes = q->held;
    if (q->tail - q->head > q->max_entries) q->max_entries = q->tail - q->head;
    q->hist[q->held] += 1;
    return t;
}

static inline double maxd(double a, double b) { return b > a ? b : a; }
static inline int64_t maxi(int64_t a, int64_t b) { return b > a ? b : a; }
static inline int64_t mini(int64_t a, int64_t b) { return b < a ? b : a; }
/* The ISA's integers (ember/isa/integers.py): add, sub and mul wrap modulo 2^64, computed in uint64_t so
 * that no signed overflow (undefined behaviour) happens; div and rem floor, and INT64_MIN / -1 wraps.
 * The divisor is never 0 here (the caller traps first). */
static inline int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t floordiv(int64_t x, int64_t y) {
    if (y == -1) return wsub(0, x);
    int64_t q = x / y;
    return (q * y != x && ((x < 0) != (y < 0))) ? q - 1 : q;
}
static inline int64_t floormod(int64_t x, int64_t y) {
    if (y == -1) return 0;
    int64_t r = x % y;
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
/* A float converted to an integer type whose values are [lo, hi): truncated toward zero, and NaN or a value
 * out of range gives `bad` (the type's minimum, as x86's cvtt instructions do), never undefined behaviour. */
static inline int64_t f2i(double x, double lo, double hi, int64_t bad) {
    return (trunc(x) >= lo && x < hi) ? (int64_t)x : bad;
}
/* A traversal unit's counter can pass INT64_MAX: ub - 1 + step > INT64_MAX (step >= 1), without overflowing. */
static inline int tu_overflows(int64_t ub, int64_t step) { return ub > 0 && step - 1 > INT64_MAX - ub; }
/* The last of lb, lb + step, ... below ub > lb (integers.tu_last); the distance ub - lb fits in uint64_t. */
static inline int64_t tu_last(int64_t lb, int64_t ub, int64_t step) {
    uint64_t n = ((uint64_t)ub - (uint64_t)lb - 1) / (uint64_t)step;
    return (int64_t)((uint64_t)lb + n * (uint64_t)step);
}
/* min(vl, ub - i) for i < ub, with ub - i computed exactly. */
static inline int64_t lanes_left(int64_t vl, int64_t ub, int64_t i) {
    uint64_t d = (uint64_t)ub - (uint64_t)i;
    return d < (uint64_t)vl ? (int64_t)d : vl;
}
/* IEEE 754-2019 maximum and minimum (ember/isa/floats.py: fmax, fmin): the first NaN if either is one, and -0
   below +0 whatever the operands' order. */
static inline double fmax_py(double a, double b) {
    return a != a ? a : (b != b ? b : (a == b ? (signbit(a) ? b : a) : (b > a ? b : a)));
}
static inline double fmin_py(double a, double b) {
    return a != a ? a : (b != b ? b : (a == b ? (signbit(a) ? a : b) : (b < a ? b : a)));
}
static inline float vmax_np(float a, float b) { return (float)fmax_py(a, b); }
static inline float vmin_np(float a, float b) { return (float)fmin_py(a, b); }
static inline double vmax_npd(double a, double b) { return fmax_py(a, b); }
static inline double vmin_npd(double a, double b) { return fmin_py(a, b); }

/* ffma.f32 / vfma.f32: a * b + c rounded once to float32, by the steps of ember/isa/floats.py in the same
 * order (exact product, TwoSum, then the one tie that double rounding can get wrong), so that both engines
 * agree on every bit. */
static inline float fma32(float a, float b, float c) {
    double p = (double)a * (double)b, s = p + (double)c, bp = s - p;
    double e = (p - (s - bp)) + ((double)c - bp);
    float r = (float)s;
    double r64 = (double)r;
    if (e != 0.0 && s != r64) {
        float other = nextafterf(r, s > r64 ? INFINITY : -INFINITY);
        if ((r64 + (double)other) * 0.5 == s) r = e > 0.0 ? fmaxf(r, other) : fminf(r, other);
        else if (isinf(r) && fabs(s) == 0x1.ffffffp+127 && (e > 0.0) != (s > 0.0)) r = copysignf(FLT_MAX, (float)s);
    }
    return r;
}

/* Typed reads of byte tensors (ld.T, mem.T): the bytes at p as one value, through memcpy, so no
 * alignment or aliasing rule of C is broken (x86 reads are little-endian, as the ISA's are). */
#define TYPED_READ(T) static inline T rd_##T(const uint8_t *p) { T v; memcpy(&v, p, sizeof v); return v; }
TYPED_READ(float) TYPED_READ(double) TYPED_READ(int8_t) TYPED_READ(uint8_t) TYPED_READ(int16_t)
TYPED_READ(uint16_t) TYPED_READ(int32_t) TYPED_READ(int64_t)

/* 16-bit floats are stored as their bits.  h2d/b2d widen exactly; d2h rounds a double to the nearest
 * f16 (ties to even), as numpy converts float64 to float16; d2b rounds through float32 first, as
 * ml_dtypes converts float64 to bfloat16. */
static inline double h2d(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 31 && m) {  /* a NaN keeps its sign and payload, unquieted, as numpy widens one */
        uint64_t u = ((uint64_t)(h & 0x8000) << 48) | 0x7ff0000000000000ULL | ((uint64_t)m << 42);
        double v; memcpy(&v, &u, 8); return v;
    }
    double v = e == 0 ? ldexp((double)m, -24) : e == 31 ? INFINITY : ldexp((double)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}
/* A float32 widened to double as the hardware widens it: a signalling NaN comes out quiet, payload kept.  Done
 * by hand because the compiler may drop a widening that a narrowing undoes, which would keep it signalling. */
static inline double f2d(float x) {
    if (x != x) { uint32_t u; memcpy(&u, &x, 4); u |= 0x00400000u; memcpy(&x, &u, 4); }
    return (double)x;
}
static inline uint16_t d2h(double x) {
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (a != a) return sign | 0x7e00;
    if (a >= 65520.0) return sign | 0x7c00;
    if (a < 6.103515625e-05) return sign | (uint16_t)nearbyint(a * 16777216.0);  /* subnormal steps of 2^-24 */
    int e;
    double f = frexp(a, &e);  /* a = f * 2^e, f in [0.5, 1) */
    double m = nearbyint((f * 2.0 - 1.0) * 1024.0);
    int big = e + 14;
    if (m == 1024.0) { m = 0.0; big += 1; }
    if (big >= 31) return sign | 0x7c00;
    return sign | (uint16_t)(big << 10) | (uint16_t)m;
}
static inline double b2d(uint16_t b) {
    uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return (double)f;
}
static inline uint16_t d2b(double x) {
    float f = (float)x; uint32_t u; memcpy(&u, &f, 4);
    if (f != f) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* ---- The out-of-order pipeline of ember/sim/pipeline.py, transcribed. ---- */
enum { CAT_COMPUTE, CAT_LOAD, CAT_POP, CAT_TOKEN, CAT_STORE, CAT_MISPREDICT, NCAT };

typedef struct { int64_t at, to; } Skip;  /* cycle `at` is full, and so is every cycle up to `to` */

typedef struct {             /* one pipe group's bookings: a ring of per-cycle counts from cycle `base` */
    int64_t per_cycle, hold, base, size, count;
    uint16_t *used;
    int64_t far0, nfar, capfar, *far_c, *far_n;  /* bookings past the ring's reach: entries far0.. nfar - 1 */
    int64_t *far_t;  /* a far entry's skip target (see port_hint), 0 for none */
    Skip *skip;      /* the ring's skip targets, by slot (NULL until a search first passes a full cycle) */
} Ports;

/* The ring grows to reach a booking up to RING_MAX cycles past the last dispatch; one further ahead (an
 * instruction waiting for a token the access unit sends after a long silent traversal) goes into the sorted
 * `far` list until the ring's window reaches its cycle: the counts are the same either way. */
#define RING_MAX ((int64_t)1 << 20)

static int64_t far_find(const Ports *q, int64_t c) {  /* the first far entry at or after cycle c */
    int64_t lo = q->far0, hi = q->nfar;
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (q->far_c[mid] < c) lo = mid + 1; else hi = mid; }
    return lo;
}
static inline int64_t port_used(const Ports *q, int64_t c) {
    if (c < q->base + q->size) return q->used[c & (q->size - 1)];
    int64_t i = far_find(q, c);
    return i < q->nfar && q->far_c[i] == c ? q->far_n[i] : 0;
}
static inline void port_book(Ports *q, int64_t c) {
    if (c < q->base + q->size) { q->used[c & (q->size - 1)] += 1; return; }
    int64_t i = far_find(q, c);
    if (i < q->nfar && q->far_c[i] == c) { q->far_n[i] += 1; return; }
    if (q->nfar == q->capfar && 2 * q->far0 >= q->nfar) {  /* reuse the room settled entries left in front */
        int64_t n = q->nfar - q->far0;
        memmove(q->far_c, q->far_c + q->far0, (size_t)n * sizeof(int64_t));
        memmove(q->far_n, q->far_n + q->far0, (size_t)n * sizeof(int64_t));
        memmove(q->far_t, q->far_t + q->far0, (size_t)n * sizeof(int64_t));
        i -= q->far0; q->nfar = n; q->far0 = 0;
    }
    if (q->nfar == q->capfar) {
        int64_t cap = q->capfar ? 2 * q->capfar : 64;
        int64_t *fc = (int64_t *)realloc(q->far_c, (size_t)cap * sizeof(int64_t));
        if (fc) q->far_c = fc;
        int64_t *fn = (int64_t *)realloc(q->far_n, (size_t)cap * sizeof(int64_t));
        if (fn) q->far_n = fn;
        int64_t *ft = (int64_t *)realloc(q->far_t, (size_t)cap * sizeof(int64_t));
        if (ft) q->far_t = ft;
        if (!fc || !fn || !ft) abort();  /* out of memory for a handful of integers */
        q->capfar = cap;
    }
    memmove(q->far_c + i + 1, q->far_c + i, (size_t)(q->nfar - i) * sizeof(int64_t));
    memmove(q->far_n + i + 1, q->far_n + i, (size_t)(q->nfar - i) * sizeof(int64_t));
    memmove(q->far_t + i + 1, q->far_t + i, (size_t)(q->nfar - i) * sizeof(int64_t));
    q->far_c[i] = c; q->far_n[i] = 1; q->far_t[i] = 0; q->nfar += 1;
}
static void far_settle(Ports *q) {  /* far entries the ring now reaches move into it */
    int64_t j = q->far0;
    while (j < q->nfar && q->far_c[j] < q->base + q->size) {
        if (q->far_c[j] >= q->base) q->used[q->far_c[j] & (q->size - 1)] += (uint16_t)q->far_n[j];
        j++;
    }
    q->far0 = j;  /* not moved down at each settle (that was quadratic); port_book reuses the room */
}

typedef struct { int64_t lo, hi; double data, commit; } Store;

typedef struct {
    double fe, d, slot, last_retire, last_commit;
    int64_t last_cat, instructions;
    double stalls[NCAT];
    int64_t rob, rob_n, rob_h; double *rob_t; int64_t *rob_c;   /* retire time, category of the last rob */
    int64_t sb_size, sb_n, sb_h; Store *sb;
    int64_t nmiss; double *miss_free;
    Ports ports[16];  /* one per pipe group (machine.ExecuteUnit.GROUPS, at most 16) */
    Trace *tr;        /* the timeline, NULL when the run is not traced */
} Pipe;

static inline void pipe_wait(Pipe *p, double t, int64_t cat) {
    if (t > p->fe) {
        if (p->tr) tr_add(p->tr, TK_WAIT + cat, TRACK_WAITS, p->fe, t, 0.0, 1);  /* trace.Events.wait */
        p->stalls[cat] += t - p->fe; p->fe = t;
    }
}

static inline double pipe_dispatch(Pipe *p, int64_t stores) {
    if (p->rob_n == p->rob) {
        double t = p->rob_t[p->rob_h]; int64_t cat = p->rob_c[p->rob_h];
        p->rob_h = p->rob_h + 1 == p->rob ? 0 : p->rob_h + 1; p->rob_n -= 1;
        pipe_wait(p, t, cat);
    }
    int64_t need = p->sb_n + stores - p->sb_size;
    if (need > p->sb_n) need = p->sb_n;  /* a scatter may want more entries than the buffer has */
    if (need > 0) {
        pipe_wait(p, p->sb[(p->sb_h + need - 1) % p->sb_size].commit, CAT_STORE);
        p->sb_h = (p->sb_h + need) % p->sb_size; p->sb_n -= need;
    }
    double d = p->d = p->fe;
    p->fe = d + p->slot;
    p->instructions += 1;
    return d;
}

/* pipeline.Ports.free_from: the first cycle >= k with room.  A full cycle stays full, so each full cycle
 * passed remembers where the search ended: a throughput-bound loop whose bookings run far ahead of the front
 * end then finds its cycle in a few steps, not by walking its whole backlog at every instruction. */
static int64_t *port_hint(Ports *q, int64_t c) {  /* where full cycle c keeps its skip target, or NULL */
    if (c < q->base + q->size) {
        if (!q->skip) q->skip = (Skip *)calloc((size_t)q->size, sizeof(Skip));
        if (!q->skip) return NULL;  /* no memory for hints: searches only take longer */
        Skip *s = &q->skip[c & (q->size - 1)];
        if (s->at != c) { s->at = c; s->to = 0; }  /* the slot's last cycle is behind the ring */
        return &s->to;
    }
    int64_t i = far_find(q, c);  /* a full far cycle has bookings, so an entry */
    return i < q->nfar && q->far_c[i] == c ? &q->far_t[i] : NULL;
}
static int64_t port_free_from(Ports *q, int64_t k) {
    int64_t start = k;
    while (port_used(q, k) >= q->per_cycle) {
        const int64_t *h = port_hint(q, k);
        k = h && *h > k ? *h : k + 1;
    }
    for (int64_t c = start; c < k;) {  /* every full cycle passed now leads straight to k */
        int64_t *h = port_hint(q, c);
        int64_t next = h && *h > c ? *h : c + 1;
        if (h) *h = k;
        c = next;
    }
    return k;
}

/* pipeline.Ports.book: the first whole cycle k >= floor(t) with room for `hold` cycles. */
static double pipe_issue(Pipe *p, int64_t g, double t) {
    Ports *q = &p->ports[g];
    int64_t floor_d = (int64_t)floor(p->d), k0 = (int64_t)floor(t), k = k0;
    if (floor_d > q->base) {  /* cycles before the last dispatch can never be booked again */
        if (floor_d - q->base >= q->size) memset(q->used, 0, (size_t)q->size * sizeof(uint16_t));
        else for (int64_t c = q->base; c < floor_d; c++) q->used[c & (q->size - 1)] = 0;
        q->base = floor_d;
        if (q->nfar > q->far0) far_settle(q);
    }
    for (;;) {
        while (k + q->hold > q->base + q->size && q->size < RING_MAX) {  /* grow the ring to reach k + hold */
            int64_t size = q->size * 2;
            uint16_t *used = (uint16_t *)calloc((size_t)size, sizeof(uint16_t));
            if (!used) break;  /* the far list takes what the ring cannot reach */
            for (int64_t c = q->base; c < q->base + q->size; c++) used[c & (size - 1)] = q->used[c & (q->size - 1)];
            free(q->used); q->used = used; q->size = size;
            free(q->skip); q->skip = NULL;  /* slots moved: the hints start again */
            if (q->nfar > q->far0) far_settle(q);
        }
        int64_t free_k = port_free_from(q, k);
        if (free_k != k) { k = free_k; continue; }  /* the ring may have to grow to reach it */
        int64_t j = 1;
        while (j < q->hold && port_used(q, k + j) < q->per_cycle) j++;
        if (j >= q->hold) break;
        k += j + 1;  /* every start up to the full cycle k + j would include it */
    }
    for (int64_t j = 0; j < q->hold; j++) port_book(q, k + j);
    q->count += 1;
    return k == k0 ? t : (double)k;
}

static inline double pipe_retire(Pipe *p, double c, int64_t cat) {
    if (c > p->last_retire) { p->last_retire = c; p->last_cat = cat; }
    int64_t at = p->rob_h + p->rob_n; if (at >= p->rob) at -= p->rob;
    p->rob_t[at] = p->last_retire; p->rob_c[at] = p->last_cat; p->rob_n += 1;
    return p->last_retire;
}

/* pipeline.Pipeline.next_uop: the uop before (done at prev) retires, the next one dispatches; when it may issue. */
static inline double pipe_next(Pipe *p, double prev, int64_t cat, double ready) {
    pipe_retire(p, prev, cat);
    double d = pipe_dispatch(p, 0);
    return d > ready ? d : ready;
}

/* pipeline.Pipeline.drain: wait for every instruction to retire and every store to be written. */
static inline void pipe_drain(Pipe *p) {
    pipe_wait(p, p->last_retire, p->last_cat);
    pipe_wait(p, p->last_commit, CAT_STORE);
}

/* A core's pipeline at the start of a run (pipeline.Pipeline.__init__): per pipe group g, per_cycle[g]
 * instructions a cycle each holding it hold[g] cycles.  Nonzero if memory ran out (pipe_free releases it). */
static int pipe_init(Pipe *p, double slot, int64_t rob, int64_t sb_size, int64_t nmiss, int64_t ngroups,
                     const int64_t *per_cycle, const int64_t *hold) {
    memset(p, 0, sizeof *p);
    p->slot = slot; p->rob = rob; p->sb_size = sb_size; p->nmiss = nmiss;
    p->rob_t = (double *)calloc((size_t)rob, sizeof(double));
    p->rob_c = (int64_t *)calloc((size_t)rob, sizeof(int64_t));
    p->sb = (Store *)calloc((size_t)sb_size, sizeof(Store));
    p->miss_free = (double *)calloc((size_t)nmiss, sizeof(double));
    int failed = !p->rob_t || !p->rob_c || !p->sb || !p->miss_free;
    for (int64_t g = 0; g < ngroups; g++) {
        p->ports[g].per_cycle = per_cycle[g]; p->ports[g].hold = hold[g]; p->ports[g].size = 4096;
        p->ports[g].used = (uint16_t *)calloc(4096, sizeof(uint16_t));
        failed |= !p->ports[g].used;
    }
    return failed;
}
static void pipe_free(Pipe *p) {
    free(p->rob_t); free(p->rob_c); free(p->sb); free(p->miss_free);
    for (int64_t g = 0; g < 16; g++) {
        free(p->ports[g].used); free(p->ports[g].far_c); free(p->ports[g].far_n); free(p->ports[g].far_t);
        free(p->ports[g].skip);
    }
}

/* The dispatch jump's predictor (ember/predictor.py, DispatchPredictor.miss) over tokens by their index:
 * *last is the index of the token before (-1 before the first), follows[1 + k] the index of the token that
 * came after token k last time (-1: none yet).  Returns whether the jump to token j was mispredicted. */
static inline int dispatch_miss(int64_t *follows, int64_t *last, int64_t j) {
    int64_t seen = *last + 1;
    *last = j;
    if (follows[seen] == j) return 0;
    follows[seen] = j;
    return 1;
}

/* The conditional branches' predictor (ember/predictor.py, BranchPredictor): gshare over 2-bit counters. */
typedef struct {
    int64_t mask, hmask, history, misses;  /* entries - 1, (1 << history bits) - 1, the outcomes, mispredictions */
    uint8_t *counters;
} Branches;

/* BranchPredictor.miss: the branch at pc went `taken`; whether it was mispredicted (counted), then learnt. */
static inline int branch_miss(Branches *b, int64_t pc, int taken) {
    int64_t i = (pc ^ b->history) & b->mask;
    int c = b->counters[i];
    b->counters[i] = (uint8_t)(taken ? (c < 3 ? c + 1 : 3) : (c > 0 ? c - 1 : 0));
    b->history = ((b->history << 1) | taken) & b->hmask;
    if ((c >= 2) == taken) return 0;
    b->misses += 1;
    return 1;
}

/* access.AccessUnit.slots: a binary min-heap of n times; only its minimum is ever read, so any heap
   holding the same times gives the same timing as Python's heapq. */
static inline void heap_push(double *h, int64_t n, double v) {
    int64_t i = n;
    while (i > 0 && h[(i - 1) / 2] > v) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
    h[i] = v;
}
static inline void heap_replace(double *h, int64_t n, double v) {  /* drop the minimum, add v */
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c]; i = c;
    }
    h[i] = v;
}

/* pipeline.Pipeline.miss_slot: the fill buffer free earliest (lowest index on a tie). */
static inline int64_t miss_slot(Pipe *p) {
    int64_t k = 0;
    for (int64_t j = 1; j < p->nmiss; j++) if (p->miss_free[j] < p->miss_free[k]) k = j;
    return k;
}

/* pipeline.Pipeline.forwarded: data time of the youngest buffered store overlapping [lo, hi), or -1. */
static inline double forwarded(Pipe *p, int64_t lo, int64_t hi) {
    for (int64_t j = p->sb_n - 1; j >= 0; j--) {
        Store *s = &p->sb[(p->sb_h + j) % p->sb_size];
        if (s->lo < hi && lo < s->hi) return s->data;
    }
    return -1.0;
}

static inline void pipe_commit(Pipe *p, int64_t lo, int64_t hi, double data, double retire, double line) {
    double c = retire > p->last_commit ? retire : p->last_commit;
    p->last_commit = line > c ? line : c;
    if (p->sb_n == p->sb_size) { p->sb_h = (p->sb_h + 1) % p->sb_size; p->sb_n -= 1; }
    Store *s = &p->sb[(p->sb_h + p->sb_n) % p->sb_size];
    s->lo = lo; s->hi = hi; s->data = data; s->commit = p->last_commit;
    p->sb_n += 1;
}

/* execute.Core.lines: every line of [addr, addr + nbytes) at e; a line not in L1 waits for a fill
 * buffer, holds it until the line arrives, and has the next `pf` lines prefetched if a buffer is free.
 * Returns the last arrival (negative on failure). */
static double core_lines(Pipe *p, Mem *m, int64_t addr, int64_t nbytes, double e, int write, int64_t pf,
                         int64_t *prefetches) {
    int64_t lb = m->lv[0].line_bytes, lo = addr / lb, hi = (addr + (nbytes > 1 ? nbytes : 1) - 1) / lb;
    double done = e;
    for (int64_t line = lo; line <= hi; line++) {
        double d;
        if (mem_contains(m, 0, line)) {
            d = mem_access(m, line * lb, e, 0, write);
        } else {
            int64_t k = miss_slot(p);
            double start = p->miss_free[k] > e ? p->miss_free[k] : e;
            d = mem_access(m, line * lb, start, 0, write);
            if (d < 0.0) return -1.0;
            p->miss_free[k] = d;
            for (int64_t nxt = line + 1; nxt <= line + pf; nxt++) {
                if (mem_contains(m, 0, nxt)) continue;
                int64_t s = miss_slot(p);
                if (p->miss_free[s] > start) continue;
                double f = mem_access(m, nxt * lb, start, 0, 0);
                if (f < 0.0) return -1.0;
                p->miss_free[s] = f;
                *prefetches += 1;
            }
        }
        if (d < 0.0) return -1.0;
        if (d > done) done = d;
    }
    return done;
}
/* execute.Core.stream_lines: a non-temporal store retired at r; each line it covers takes the fill buffer free
 * earliest as its write-combining buffer and is written around the caches.  Returns when the last line had its
 * buffer (the store's entry then commits), < 0 on failure. */
static double core_stream(Pipe *p, Mem *m, int64_t addr, int64_t nbytes, double r) {
    int64_t lb = m->lv[0].line_bytes, lo = addr / lb, hi = (addr + (nbytes > 1 ? nbytes : 1) - 1) / lb;
    double handed = r;
    for (int64_t line = lo; line <= hi; line++) {
        int64_t k = miss_slot(p);
        double start = p->miss_free[k] > r ? p->miss_free[k] : r;
        double sent = mem_write_around(m, line * lb, start);
        if (sent < 0.0) return -1.0;
        p->miss_free[k] = sent;
        if (start > handed) handed = start;
    }
    return handed;
}
