/*
 * can_frame.h - a classic CAN frame and its length on the wire.
 *
 * Copyright (C) 2026 the Aiko stack authors. GPL-3.0-or-later (see ../LICENSE).
 */
#ifndef HARNESS_CAN_FRAME_H
#define HARNESS_CAN_FRAME_H

#include <stdint.h>

typedef struct {
    uint32_t id; /* 11 or 29 bits */
    uint8_t extended;
    uint8_t remote;
    uint8_t dlc; /* 0..15 as on the wire; at most 8 data bytes */
    uint8_t data[8];
} can_frame_t;

/* Bits from SOF to the end of EOF, with the stuff bits of SOF..CRC (ISO 11898-1; the same stream as
 * firmware_protocol.bus_load.exact_frame_bits, which adds the 3-bit interframe space). */
uint32_t can_frame_bits(const can_frame_t *frame);

/* 1 if a wins arbitration against b (lower identifier; a standard frame before an extended one with the same
 * base identifier; a data frame before a remote frame with the same identifier). */
int can_wins(const can_frame_t *a, const can_frame_t *b);

#endif
