/* Ember fast engine runtime: the cache model, DRAM booking and output queue of the reference engine
 * (ember/sim/cache.py, queue.py), transcribed to C.  Every generated program includes this text, so
 * the compiled program calls them without leaving machine code.  A condition the reference reports
 * as an error returns a negative time; the engine then lets the reference engine word the error.
 * Compiled without fast-math and without FP contraction: the arithmetic must round as Python's does. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t nlev, *lv;           /* per level: sets, ways, first slot in tags, line bytes, first slot in rdy */
    double *lat;                 /* latency each level adds */
    int64_t *tags; double *rdy;  /* per set: count, then lines most recent first; their arrival times */
    int64_t *cst;                /* per level: hits, misses, bytes filled */
    double *ds, *de; int64_t *dn, dcap;  /* booked DRAM transfers: sorted disjoint intervals */
    double *dst, *dpar;          /* DRAM requests, bytes, busy cycles; DRAM latency, transfer time */
    double floor;                /* never prune bookings ending after this (a later core starts at 0) */
} Mem;

static double book(Mem *m, double now, double watermark) {
    double x = m->dpar[1], *ds = m->ds, *de = m->de;
    int64_t n = m->dn[0];
    if (watermark > m->floor) watermark = m->floor;
    if (n + 2 > m->dcap) {  /* intervals ending before any future request starts can never matter again */
        int64_t keep = 0;
        for (int64_t k = 0; k < n; k++)
            if (de[k] >= watermark) { ds[keep] = ds[k]; de[keep] = de[k]; keep++; }
        n = keep;
        m->dn[0] = n;
        if (n + 2 > m->dcap) return -1.0;
    }
    int64_t lo = 0, hi = n;  /* first interval ending after now (bisect_right on ends) */
    while (lo < hi) { int64_t mid = (lo + hi) / 2; if (now < de[mid]) hi = mid; else lo = mid + 1; }
    int64_t i = lo;
    double t = now;
    while (i < n && ds[i] < t + x) { if (de[i] > t) t = de[i]; i++; }
    if (i > 0 && de[i - 1] == t) {
        de[i - 1] = t + x;
        if (i < n && ds[i] == t + x) {
            de[i - 1] = de[i];
            memmove(ds + i, ds + i + 1, (size_t)(n - i - 1) * sizeof(double));
            memmove(de + i, de + i + 1, (size_t)(n - i - 1) * sizeof(double));
            m->dn[0] = n - 1;
        }
    } else if (i < n && ds[i] == t + x) {
        ds[i] = t;
    } else {
        memmove(ds + i + 1, ds + i, (size_t)(n - i) * sizeof(double));
        memmove(de + i + 1, de + i, (size_t)(n - i) * sizeof(double));
        ds[i] = t; de[i] = t + x;
        m->dn[0] = n + 1;
    }
    return t;
}

/* Set index of a line at level k: a mask when the set count is a power of two. */
static inline int64_t set_of(const int64_t *lv, int64_t k, int64_t line) {
    int64_t sets = lv[k * 5];
    return (sets & (sets - 1)) == 0 ? (line & (sets - 1)) : line % sets;
}

/* Set s of level k keeps, in `tags` from slot lv[k*5+2] + s*(ways+1): the number of lines held, then
 * the lines most recently used first; `rdy` (from lv[k*5+4] + s*ways) their arrival times.  The count
 * and the most recent line share a host cache line, so a repeated access touches one. */
static double mem_access(Mem *m, int64_t addr, double t, int64_t first, double watermark) {
    int64_t nlev = m->nlev, *lv = m->lv;
    int64_t line = lv[3] == 64 ? addr >> 6 : addr / lv[3];
    double now = t, done = 0.0;
    int64_t last = nlev;
    for (int64_t k = first; k < nlev; k++) {
        now = now + m->lat[k];
        int64_t ways = lv[k * 5 + 1], s = set_of(lv, k, line);
        int64_t *tg = m->tags + lv[k * 5 + 2] + s * (ways + 1);
        double *rd = m->rdy + lv[k * 5 + 4] + s * ways;
        int64_t n = tg[0], pos = -1;
        for (int64_t j = 0; j < n; j++) if (tg[1 + j] == line) { pos = j; break; }
        if (pos >= 0) {
            double r = rd[pos];
            if (pos > 0) {
                memmove(tg + 2, tg + 1, (size_t)pos * sizeof(int64_t));
                memmove(rd + 1, rd, (size_t)pos * sizeof(double));
                tg[1] = line; rd[0] = r;
            }
            m->cst[k * 3] += 1;
            done = r > now ? r : now;
            last = k;
            break;
        }
        m->cst[k * 3 + 1] += 1;
    }
    if (last == nlev) {
        double start = book(m, now, watermark);
        if (start < 0.0) return -1.0;
        done = start + m->dpar[0] + m->dpar[1];
        m->dst[0] += 1.0; m->dst[1] += (double)lv[3]; m->dst[2] += m->dpar[1];
    }
    for (int64_t k = first; k < last; k++) {
        m->cst[k * 3 + 2] += lv[k * 5 + 3];
        int64_t ways = lv[k * 5 + 1], s = set_of(lv, k, line);
        int64_t *tg = m->tags + lv[k * 5 + 2] + s * (ways + 1);
        double *rd = m->rdy + lv[k * 5 + 4] + s * ways;
        int64_t n = tg[0] < ways ? tg[0] : ways - 1;  /* a full set drops its least recently used line */
        memmove(tg + 2, tg + 1, (size_t)n * sizeof(int64_t));
        memmove(rd + 1, rd, (size_t)n * sizeof(double));
        tg[1] = line; rd[0] = done;
        tg[0] = n + 1;
    }
    return done;
}

static double mem_range(Mem *m, int64_t addr, int64_t nbytes, double t, int64_t first, double watermark) {
    int64_t lb = m->lv[3], lo = addr / lb, hi = (addr + (nbytes > 1 ? nbytes : 1) - 1) / lb;
    double done = t;
    for (int64_t ln = lo; ln <= hi; ln++) {
        double d = mem_access(m, ln * lb, t, first, watermark);
        if (d < 0.0) return -1.0;
        if (d > done) done = d;
    }
    return done;
}

typedef struct {
    int64_t head, tail, held, max_bytes, max_entries, cap, mask;
    int64_t *bytes, *hist; double *pop, stall;
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
    if (q->held > q->max_bytes) q->max_bytes = q->held;
    if (q->tail - q->head > q->max_entries) q->max_entries = q->tail - q->head;
    q->hist[q->held] += 1;
    return t;
}

static inline double maxd(double a, double b) { return b > a ? b : a; }
static inline double mind(double a, double b) { return b < a ? b : a; }
static inline int64_t maxi(int64_t a, int64_t b) { return b > a ? b : a; }
static inline int64_t mini(int64_t a, int64_t b) { return b < a ? b : a; }
static inline int64_t floordiv(int64_t x, int64_t y) { int64_t q = x / y; return (q * y != x && ((x < 0) != (y < 0))) ? q - 1 : q; }
static inline int64_t floormod(int64_t x, int64_t y) { int64_t r = x % y; return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r; }
static inline double fmax_py(double a, double b) { return a != a ? a : (b != b ? b : (b > a ? b : a)); }
static inline double fmin_py(double a, double b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); }
static inline float vmax_np(float a, float b) { return (a >= b || a != a) ? a : b; }
static inline float vmin_np(float a, float b) { return (a <= b || a != a) ? a : b; }
static inline double vmax_npd(double a, double b) { return (a >= b || a != a) ? a : b; }
static inline double vmin_npd(double a, double b) { return (a <= b || a != a) ? a : b; }

/* 16-bit floats are stored as their bits.  h2d/b2d widen exactly; d2h rounds a double to the nearest
 * f16 (ties to even), as numpy converts float64 to float16; d2b rounds through float32 first, as
 * ml_dtypes converts float64 to bfloat16. */
static inline double h2d(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp((double)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp((double)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
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
