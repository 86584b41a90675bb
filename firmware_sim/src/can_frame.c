/*
 * can_frame.c - frame lengths with bit stuffing, and arbitration order.
 *
 * Copyright (C) 2026 the Aiko stack authors. GPL-3.0-or-later (see ../LICENSE).
 */
#include "can_frame.h"

typedef struct {
    uint8_t bits[160];
    uint32_t n;
} bitstream_t;

static void put(bitstream_t *s, uint32_t value, uint32_t count) {
    while (count--) s->bits[s->n++] = (uint8_t)((value >> count) & 1u);
}

static uint32_t crc15(const bitstream_t *s) {
    uint32_t crc = 0, i;
    for (i = 0; i < s->n; i++) {
        uint32_t feedback = s->bits[i] ^ ((crc >> 14) & 1u);
        crc = (crc << 1) & 0x7FFFu;
        if (feedback) crc ^= 0x4599u;
    }
    return crc;
}

static uint32_t stuffed_length(const bitstream_t *s) {
    uint32_t out = 0, i, run = 0;
    int last = -1;
    for (i = 0; i < s->n; i++) {
        out++;
        if (s->bits[i] == last) {
            run++;
        } else {
            last = s->bits[i];
            run = 1;
        }
        if (run == 5) { /* a complementary stuff bit, which starts the next run */
            out++;
            last = 1 - last;
            run = 1;
        }
    }
    return out;
}

uint32_t can_frame_bits(const can_frame_t *f) {
    bitstream_t s;
    uint32_t i, bytes = f->remote ? 0u : (f->dlc > 8u ? 8u : f->dlc);
    s.n = 0;
    put(&s, 0, 1); /* SOF */
    if (f->extended) {
        put(&s, f->id >> 18, 11);
        put(&s, 1, 1); /* SRR */
        put(&s, 1, 1); /* IDE */
        put(&s, f->id & 0x3FFFFu, 18);
        put(&s, f->remote, 1);
        put(&s, 0, 2); /* r1, r0 */
    } else {
        put(&s, f->id, 11);
        put(&s, f->remote, 1);
        put(&s, 0, 2); /* IDE, r0 */
    }
    put(&s, f->dlc, 4);
    for (i = 0; i < bytes; i++) put(&s, f->data[i], 8);
    put(&s, crc15(&s), 15);
    return stuffed_length(&s) + 1u + 2u + 7u; /* CRC delimiter, ACK slot + delimiter, EOF: never stuffed */
}

static uint32_t base_id(const can_frame_t *f) { return f->extended ? f->id >> 18 : f->id; }

int can_wins(const can_frame_t *a, const can_frame_t *b) {
    if (base_id(a) != base_id(b)) return base_id(a) < base_id(b);
    if (a->extended != b->extended) return !a->extended;
    if (a->extended && a->id != b->id) return a->id < b->id;
    return a->remote < b->remote;
}
