/* mcp2515.c - interrupt-driven MCP2515 driver (see mcp2515.h). Register map: MCP2515 datasheet, Table 11-1. */
#include "mcp2515.h"

#include <avr/interrupt.h>
#include <avr/io.h>
#include <util/atomic.h>

/* SPI instructions (datasheet Table 12-1) */
#define MCP_RESET 0xC0u
#define MCP_READ 0x03u
#define MCP_WRITE 0x02u
#define MCP_BIT_MODIFY 0x05u
#define MCP_READ_RX0 0x90u /* READ RX BUFFER starting at RXB0SIDH; 0x94: RXB1SIDH */
#define MCP_READ_RX1 0x94u
#define MCP_LOAD_TX0 0x40u /* LOAD TX BUFFER starting at TXB0SIDH */
#define MCP_RTS_TX0 0x81u

/* registers */
#define MCP_RXF0 0x00u
#define MCP_RXF1 0x04u
#define MCP_RXF2 0x08u
#define MCP_RXF3 0x10u
#define MCP_RXF4 0x14u
#define MCP_RXF5 0x18u
#define MCP_RXM0 0x20u
#define MCP_RXM1 0x24u
#define MCP_CANSTAT 0x0Eu
#define MCP_CANCTRL 0x0Fu
#define MCP_CNF3 0x28u
#define MCP_CNF2 0x29u
#define MCP_CNF1 0x2Au
#define MCP_CANINTE 0x2Bu
#define MCP_CANINTF 0x2Cu
#define MCP_EFLG 0x2Du
#define MCP_RXB0CTRL 0x60u
#define MCP_RXB1CTRL 0x70u

/* CANINTF / CANINTE bits */
#define MCP_RX0IF 0x01u
#define MCP_RX1IF 0x02u
#define MCP_TX0IF 0x04u
#define MCP_ERRIF 0x20u
#define MCP_MERRF 0x80u
#define MCP_INTERRUPTS (MCP_RX0IF | MCP_RX1IF | MCP_TX0IF | MCP_ERRIF | MCP_MERRF)

#define MCP_MODE_MASK 0xE0u
#define MCP_MODE_NORMAL 0x00u
#define MCP_MODE_CONFIG 0x80u

#define CS_LOW() (PORTB &= (uint8_t)~(1u << PB0))
#define CS_HIGH() (PORTB |= (uint8_t)(1u << PB0))

volatile mcp_stats_t mcp_stats;

static jm_frame_t tx_queue[MCP_TX_QUEUE];
static volatile uint8_t tx_head, tx_tail; /* head: next to load; tail: next free */
static volatile uint8_t tx_busy;          /* TXB0 holds a frame not yet sent */

static uint8_t spi(uint8_t out) {
    SPDR = out;
    while (!(SPSR & (1u << SPIF))) {
    }
    return SPDR;
}

static uint8_t read_register(uint8_t address) {
    uint8_t value;
    CS_LOW();
    spi(MCP_READ);
    spi(address);
    value = spi(0u);
    CS_HIGH();
    return value;
}

static void write_registers(uint8_t address, const uint8_t *values, uint8_t count) {
    CS_LOW();
    spi(MCP_WRITE);
    spi(address);
    while (count--) spi(*values++);
    CS_HIGH();
}

static void write_register(uint8_t address, uint8_t value) { write_registers(address, &value, 1u); }

static void bit_modify(uint8_t address, uint8_t mask, uint8_t value) {
    CS_LOW();
    spi(MCP_BIT_MODIFY);
    spi(address);
    spi(mask);
    spi(value);
    CS_HIGH();
}

static void write_standard_id(uint8_t address, uint16_t id) {
    uint8_t id_bytes[4];
    id_bytes[0] = (uint8_t)(id >> 3);
    id_bytes[1] = (uint8_t)((id & 0x07u) << 5); /* EXIDE = 0: the filter applies to standard frames */
    id_bytes[2] = 0u;
    id_bytes[3] = 0u;
    write_registers(address, id_bytes, 4u);
}

uint8_t mcp_init(uint8_t node) {
    static const uint8_t timing[3] = {
        0x02u, /* CNF3: PHSEG2 = 3 TQ */
        0x90u, /* CNF2: BTLMODE, PHSEG1 = 3 TQ, PRSEG = 1 TQ */
        0x00u, /* CNF1: SJW = 1 TQ, BRP = 0: TQ = 2 / 16 MHz; 1 + 1 + 3 + 3 = 8 TQ = 1 us = 1 Mbit/s */
    };
    uint8_t i;
    /* SPI master, mode 0, f_osc / 2 = 8 MHz (MCP2515: up to 10 MHz) */
    DDRB |= (uint8_t)((1u << PB0) | (1u << PB1) | (1u << PB2));
    CS_HIGH();
    SPCR = (uint8_t)((1u << SPE) | (1u << MSTR));
    SPSR = (uint8_t)(1u << SPI2X);
    CS_LOW();
    spi(MCP_RESET);
    CS_HIGH();
    for (i = 0u; i < 200u; i++) { /* the oscillator start-up: 128 clocks after reset; poll the mode */
        if ((read_register(MCP_CANSTAT) & MCP_MODE_MASK) == MCP_MODE_CONFIG) break;
    }
    if (i == 200u) return 0u;
    write_registers(MCP_CNF3, timing, 3u);
    write_standard_id(MCP_RXM0, 0x7FFu);
    write_standard_id(MCP_RXM1, 0x7FFu);
    write_standard_id(MCP_RXF0, AIKO_ID_EMERGENCY_STOP);
    write_standard_id(MCP_RXF1, AIKO_ID_COMMAND);
    write_standard_id(MCP_RXF2, (uint16_t)(AIKO_ID_REFERENCE_BASE + node));
    write_standard_id(MCP_RXF3, (uint16_t)(AIKO_ID_PARAMETER_REQUEST_BASE + node));
    write_standard_id(MCP_RXF4, (uint16_t)(AIKO_ID_REFERENCE_BASE + node));
    write_standard_id(MCP_RXF5, (uint16_t)(AIKO_ID_PARAMETER_REQUEST_BASE + node));
    write_register(MCP_RXB0CTRL, 0x04u); /* RXM = 00 (filters on), BUKT: roll over into RXB1 */
    write_register(MCP_RXB1CTRL, 0x00u);
    write_register(MCP_CANINTF, 0u);
    write_register(MCP_CANINTE, MCP_INTERRUPTS);
    bit_modify(MCP_CANCTRL, MCP_MODE_MASK, MCP_MODE_NORMAL);
    for (i = 0u; i < 200u; i++) {
        if ((read_register(MCP_CANSTAT) & MCP_MODE_MASK) == MCP_MODE_NORMAL) break;
    }
    if (i == 200u) return 0u;
    /* /INT on INT0 (PD0), falling edge: the handler empties every flag, so each new event is a new edge */
    EICRA = (uint8_t)((EICRA & ~((1u << ISC01) | (1u << ISC00))) | (1u << ISC01));
    EIFR = (uint8_t)(1u << INTF0);
    EIMSK |= (uint8_t)(1u << INT0);
    return 1u;
}

static void load_next(void) { /* with interrupts off, or in the interrupt handler */
    const jm_frame_t *f;
    uint8_t i;
    if (tx_busy || tx_head == tx_tail) return;
    f = &tx_queue[tx_head];
    CS_LOW();
    spi(MCP_LOAD_TX0);
    spi((uint8_t)(f->id >> 3));
    spi((uint8_t)((f->id & 0x07u) << 5));
    spi(0u);
    spi(0u);
    spi((uint8_t)(f->dlc & 0x0Fu));
    for (i = 0u; i < f->dlc && i < 8u; i++) spi(f->data[i]);
    CS_HIGH();
    CS_LOW();
    spi(MCP_RTS_TX0);
    CS_HIGH();
    tx_busy = 1u;
    tx_head = (uint8_t)((tx_head + 1u) % MCP_TX_QUEUE);
}

void mcp_send(const jm_frame_t *frame) {
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE) {
        uint8_t next = (uint8_t)((tx_tail + 1u) % MCP_TX_QUEUE);
        if (next == tx_head) {
            mcp_stats.tx_dropped++;
        } else {
            tx_queue[tx_tail] = *frame;
            tx_tail = next;
            load_next();
        }
    }
}

static void read_buffer(uint8_t instruction) {
    jm_frame_t frame;
    uint8_t sidh, sidl, dlc, i;
    CS_LOW();
    spi(instruction);
    sidh = spi(0u);
    sidl = spi(0u);
    spi(0u); /* EID8 */
    spi(0u); /* EID0 */
    dlc = spi(0u);
    frame.flags = 0u;
    frame.id = (uint16_t)(((uint16_t)sidh << 3) | (sidl >> 5));
    if (sidl & 0x08u) frame.flags |= JM_FRAME_EXTENDED; /* IDE */
    if ((sidl & 0x08u) ? (dlc & 0x40u) : (sidl & 0x10u)) frame.flags |= JM_FRAME_REMOTE; /* RTR / SRR */
    frame.dlc = (uint8_t)(dlc & 0x0Fu);
    for (i = 0u; i < 8u; i++) frame.data[i] = i < frame.dlc ? spi(0u) : 0u;
    CS_HIGH(); /* clears RXnIF */
    mcp_received(&frame);
}

ISR(INT0_vect) {
    uint8_t flags;
    while ((flags = (uint8_t)(read_register(MCP_CANINTF) & MCP_INTERRUPTS)) != 0u) {
        if (flags & MCP_RX0IF) read_buffer(MCP_READ_RX0);
        if (flags & MCP_RX1IF) read_buffer(MCP_READ_RX1);
        if (flags & MCP_TX0IF) {
            bit_modify(MCP_CANINTF, MCP_TX0IF, 0u);
            tx_busy = 0u;
            load_next();
        }
        if (flags & (MCP_ERRIF | MCP_MERRF)) {
            uint8_t eflg = read_register(MCP_EFLG);
            if (eflg & 0xC0u) mcp_stats.rx_overflows++;
            bit_modify(MCP_EFLG, 0xC0u, 0u);
            bit_modify(MCP_CANINTF, MCP_ERRIF | MCP_MERRF, 0u);
            mcp_stats.bus_errors++;
        }
    }
}
