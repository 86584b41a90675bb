/*
 * mcp2515.h - Microchip MCP2515 stand-alone CAN controller on the ATmega128's SPI (datasheet DS20001801).
 *
 * Interrupt-driven: the MCP2515 pulls /INT low (INT0, falling edge) when a frame arrived or TXB0 finished; the
 * handler reads the receive buffers (READ RX BUFFER, which clears the flag), hands each frame to mcp_received
 * (provided by the application, called in interrupt context) and loads the next queued frame into TXB0. Frames are
 * sent one at a time through TXB0, in the order queued (two buffers with equal priority could swap two frames).
 * Acceptance filters pass only the frames this node must see: EmergencyStop and Command (RXB0, rolling over into
 * RXB1 when RXB0 is full) and its own JointReference and ParameterRequest (RXB1).
 */
#ifndef AIKO_MCP2515_H
#define AIKO_MCP2515_H

#include <stdint.h>

#include "joint_module.h"

#define MCP_TX_QUEUE 16u /* frames waiting for TXB0 (a feedback burst is 2-3 frames) */

typedef struct {
    uint16_t tx_dropped;   /* frames not sent: the queue was full */
    uint16_t rx_overflows; /* frames the MCP2515 lost: both receive buffers were full (EFLG.RXnOVR) */
    uint16_t bus_errors;   /* error interrupts (ERRIF / MERRF) */
} mcp_stats_t;

extern volatile mcp_stats_t mcp_stats;

/* Reset the controller, set 1 Mbit/s at 16 MHz, the filters for `node`, the interrupts, and go to normal mode.
 * Returns 0 if the controller did not answer (no CANSTAT in configuration mode after reset). */
uint8_t mcp_init(uint8_t node);

/* Queue a frame for transmission (safe from main and from interrupts). */
void mcp_send(const jm_frame_t *frame);

/* Called from the MCP2515 interrupt for every frame received. */
void mcp_received(const jm_frame_t *frame);

#endif /* AIKO_MCP2515_H */
