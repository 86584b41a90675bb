/*
 * mcp2515_model.h - the Microchip MCP2515 CAN controller, as seen from its SPI port and its /INT pin.
 *
 * Copyright (C) 2026 the Aiko stack authors. GPL-3.0-or-later (see ../LICENSE).
 *
 * Modelled from the MCP2515 datasheet (DS20001801): the register map, the SPI instructions (RESET, READ, WRITE,
 * BIT MODIFY, READ RX BUFFER, LOAD TX BUFFER, RTS, READ STATUS, RX STATUS), configuration / normal / sleep modes,
 * the acceptance masks and filters with RXB0's rollover, three transmit buffers chosen by TXP priority, the
 * interrupt flags and /INT, receive overflow (EFLG.RXnOVR). Not modelled (a firmware that relies on them is told
 * on stderr): loopback and listen-only modes, one-shot mode, bus errors and the error counters, the TXnRTS and
 * RXnBF pins, CLKOUT, wake-up. Bit timing: CNF1..3 must give 1 Mbit/s on a 16 MHz crystal, the bus's rate;
 * otherwise the controller never reaches the bus (as a real one on the wrong rate would not).
 */
#ifndef HARNESS_MCP2515_MODEL_H
#define HARNESS_MCP2515_MODEL_H

#include <stdint.h>

#include "can_frame.h"

typedef struct {
    uint8_t reg[128];
    /* SPI transaction in progress */
    uint8_t selected;
    uint8_t phase; /* see mcp2515_model.c */
    uint8_t after_address; /* READ, WRITE or BIT MODIFY: what the address byte starts */
    uint8_t address;
    uint8_t mask;
    uint8_t read_rx_buffer; /* READ RX BUFFER n in this transaction: 1 + n, clears RXnIF at the end */
    /* transmit requests: the cycle each TXREQ was set */
    uint64_t tx_request_cycle[3];
    /* statistics and diagnostics */
    uint32_t frames_sent, frames_received;
    uint8_t warned_mode, warned_timing;
} mcp2515_t;

void mcp_model_reset(mcp2515_t *m);

/* One SPI byte while /CS is low: the byte the controller shifts out during the byte `in`. */
uint8_t mcp_model_spi(mcp2515_t *m, uint8_t in, uint64_t now_cycle);
void mcp_model_select(mcp2515_t *m, int selected);

/* /INT: 0 (asserted) when an enabled interrupt flag is set. */
int mcp_model_int_level(const mcp2515_t *m);

/* The frame this controller would send now (highest-priority buffer with TXREQ); returns the buffer index
 * (0..2) and its request cycle, or -1. */
int mcp_model_pending(const mcp2515_t *m, can_frame_t *frame, uint64_t *request_cycle);
/* The buffer's frame went out: TXREQ cleared, TXnIF set. */
void mcp_model_transmitted(mcp2515_t *m, int buffer);
/* A frame on the bus (not this controller's own): filtered into a receive buffer, or counted as overflow. */
void mcp_model_receive(mcp2515_t *m, const can_frame_t *frame);
/* Whether the controller takes part in the bus (normal mode, 1 Mbit/s timing); warns once on stderr if not. */
int mcp_model_on_bus(mcp2515_t *m, int module_index);

#endif
