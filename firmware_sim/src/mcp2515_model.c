/*
 * mcp2515_model.c - see mcp2515_model.h. Register addresses and bits: MCP2515 datasheet, Tables 11-1 and 11-2.
 *
 * Copyright (C) 2026 the Aiko stack authors. GPL-3.0-or-later (see ../LICENSE).
 */
#include "mcp2515_model.h"

#include <stdio.h>
#include <string.h>

#define CANSTAT 0x0Eu
#define CANCTRL 0x0Fu
#define CNF3 0x28u
#define CNF2 0x29u
#define CNF1 0x2Au
#define CANINTE 0x2Bu
#define CANINTF 0x2Cu
#define EFLG 0x2Du
#define TXB0CTRL 0x30u
#define RXB0CTRL 0x60u
#define RXB1CTRL 0x70u

#define MODE_NORMAL 0x00u
#define MODE_SLEEP 0x20u
#define MODE_CONFIG 0x80u

#define RX0IF 0x01u
#define RX1IF 0x02u
#define ERRIF 0x20u
#define TXREQ 0x08u

enum { PHASE_COMMAND, PHASE_ADDRESS, PHASE_READ, PHASE_WRITE, PHASE_MASK, PHASE_MODIFY, PHASE_STATUS,
       PHASE_RX_STATUS, PHASE_IGNORE };
enum { AFTER_READ, AFTER_WRITE, AFTER_MODIFY };

static uint8_t mode(const mcp2515_t *m) { return (uint8_t)(m->reg[CANSTAT] & 0xE0u); }

void mcp_model_reset(mcp2515_t *m) {
    uint8_t selected = m->selected;
    uint32_t sent = m->frames_sent, received = m->frames_received;
    uint8_t warned_mode = m->warned_mode, warned_timing = m->warned_timing;
    memset(m, 0, sizeof *m);
    m->selected = selected;
    m->frames_sent = sent;
    m->frames_received = received;
    m->warned_mode = warned_mode;
    m->warned_timing = warned_timing;
    m->reg[CANSTAT] = MODE_CONFIG;
    m->reg[CANCTRL] = 0x87u; /* REQOP = configuration, CLKEN, CLKPRE = 8 */
}

/* CANSTAT and CANCTRL appear at xEh / xFh in every row of the map */
static uint8_t canonical(uint8_t address) {
    address &= 0x7Fu;
    if ((address & 0x0Fu) == 0x0Eu) return CANSTAT;
    if ((address & 0x0Fu) == 0x0Fu) return CANCTRL;
    return address;
}

static void write_register(mcp2515_t *m, uint8_t address, uint8_t value, uint64_t now) {
    uint8_t a = canonical(address), old = m->reg[a];
    int config = mode(m) == MODE_CONFIG;
    if (a == CANSTAT) return; /* read-only */
    if (a == CANCTRL) {
        uint8_t request = (uint8_t)(value & 0xE0u);
        m->reg[CANCTRL] = value;
        if (request == MODE_NORMAL || request == MODE_CONFIG || request == MODE_SLEEP) {
            m->reg[CANSTAT] = (uint8_t)((m->reg[CANSTAT] & 0x1Fu) | request);
        } else if (!m->warned_mode) {
            m->warned_mode = 1;
            fprintf(stderr, "aiko-avr-harness: MCP2515 mode 0x%02X (loopback/listen-only) is not modelled\n", request);
        }
        if (value & 0x10u) { /* ABAT: abort all pending transmissions */
            int b;
            for (b = 0; b < 3; b++) m->reg[TXB0CTRL + 0x10u * b] &= (uint8_t)~TXREQ;
        }
        return;
    }
    if (a < 0x30u && a != CANINTE && a != CANINTF && a != EFLG && a != 0x0Cu && a != 0x0Du && !config) {
        return; /* filters, masks and CNF1..3 are writable in configuration mode only */
    }
    if (a == EFLG) { /* only RX0OVR and RX1OVR can be written (cleared) */
        m->reg[EFLG] = (uint8_t)((old & 0x3Fu) | (old & value & 0xC0u));
        return;
    }
    if (a == TXB0CTRL || a == TXB0CTRL + 0x10u || a == TXB0CTRL + 0x20u) {
        int b = (a - TXB0CTRL) >> 4;
        m->reg[a] = (uint8_t)((old & 0x70u) | (value & 0x0Bu)); /* ABTF, MLOA, TXERR are read-only */
        if ((value & TXREQ) && !(old & TXREQ)) m->tx_request_cycle[b] = now;
        return;
    }
    if (a == RXB0CTRL) {
        m->reg[a] = (uint8_t)((old & 0x0Bu) | (value & 0x64u)); /* RXRTR, BUKT1, FILHIT0 are read-only */
        return;
    }
    if (a == RXB1CTRL) {
        m->reg[a] = (uint8_t)((old & 0x0Fu) | (value & 0x60u));
        return;
    }
    m->reg[a] = value;
}

static uint8_t read_status(const mcp2515_t *m) {
    const uint8_t *r = m->reg;
    return (uint8_t)((r[CANINTF] & 0x01u) | (r[CANINTF] & 0x02u) | ((r[TXB0CTRL] & TXREQ) ? 0x04u : 0u) |
                     ((r[CANINTF] & 0x04u) << 1) | ((r[TXB0CTRL + 0x10u] & TXREQ) ? 0x10u : 0u) |
                     ((r[CANINTF] & 0x08u) << 2) | ((r[TXB0CTRL + 0x20u] & TXREQ) ? 0x40u : 0u) |
                     ((r[CANINTF] & 0x10u) << 3));
}

static uint8_t rx_status(const mcp2515_t *m) {
    uint8_t flags = (uint8_t)(m->reg[CANINTF] & 0x03u), out = (uint8_t)(flags << 6), b = flags & 1u ? 0u : 1u;
    uint8_t ctrl = m->reg[b ? RXB1CTRL : RXB0CTRL], sidl = m->reg[b ? 0x72u : 0x62u], dlc = m->reg[b ? 0x75u : 0x65u];
    if (!flags) return 0u;
    if (sidl & 0x08u) out |= (uint8_t)(0x10u | ((dlc & 0x40u) ? 0x08u : 0u)); /* extended (remote) */
    else if (sidl & 0x10u) out |= 0x08u;                                       /* standard remote */
    out |= (uint8_t)(b ? (ctrl & 0x07u) : (ctrl & 0x01u));                      /* filter hit */
    return out;
}

void mcp_model_select(mcp2515_t *m, int selected) {
    if (selected && !m->selected) {
        m->phase = PHASE_COMMAND;
        m->read_rx_buffer = 0;
    } else if (!selected && m->selected && m->read_rx_buffer) {
        m->reg[CANINTF] &= (uint8_t)~(m->read_rx_buffer == 1 ? RX0IF : RX1IF); /* READ RX BUFFER ends */
    }
    m->selected = (uint8_t)selected;
}

uint8_t mcp_model_spi(mcp2515_t *m, uint8_t in, uint64_t now) {
    static const uint8_t rx_start[4] = {0x61u, 0x66u, 0x71u, 0x76u};
    static const uint8_t tx_start[6] = {0x31u, 0x36u, 0x41u, 0x46u, 0x51u, 0x56u};
    uint8_t out = 0xFFu;
    switch (m->phase) {
        case PHASE_COMMAND:
            if (in == 0xC0u) {
                mcp_model_reset(m);
                m->phase = PHASE_IGNORE;
            } else if (in == 0x03u) {
                m->after_address = AFTER_READ;
                m->phase = PHASE_ADDRESS;
            } else if (in == 0x02u) {
                m->after_address = AFTER_WRITE;
                m->phase = PHASE_ADDRESS;
            } else if (in == 0x05u) {
                m->after_address = AFTER_MODIFY;
                m->phase = PHASE_ADDRESS;
            } else if ((in & 0xF9u) == 0x90u) {
                uint8_t n = (uint8_t)((in >> 1) & 3u);
                m->address = rx_start[n];
                m->read_rx_buffer = (uint8_t)(1u + (n >> 1));
                m->phase = PHASE_READ;
            } else if ((in & 0xF8u) == 0x40u && (in & 7u) < 6u) {
                m->address = tx_start[in & 7u];
                m->phase = PHASE_WRITE;
            } else if ((in & 0xF8u) == 0x80u) {
                int b;
                for (b = 0; b < 3; b++) {
                    if (in & (1u << b)) write_register(m, (uint8_t)(TXB0CTRL + 0x10u * b),
                                                       (uint8_t)(m->reg[TXB0CTRL + 0x10u * b] | TXREQ), now);
                }
                m->phase = PHASE_IGNORE;
            } else if (in == 0xA0u) {
                m->phase = PHASE_STATUS;
            } else if (in == 0xB0u) {
                m->phase = PHASE_RX_STATUS;
            } else {
                m->phase = PHASE_IGNORE;
            }
            break;
        case PHASE_ADDRESS:
            m->address = (uint8_t)(in & 0x7Fu);
            m->phase = m->after_address == AFTER_READ ? PHASE_READ : (m->after_address == AFTER_WRITE ? PHASE_WRITE
                                                                                                : PHASE_MASK);
            break;
        case PHASE_READ:
            out = m->reg[canonical(m->address)];
            if (m->read_rx_buffer && (m->address == 0x6Du || m->address == 0x7Du)) {
                m->phase = PHASE_IGNORE; /* the end of the receive buffer */
            }
            m->address = (uint8_t)((m->address + 1u) & 0x7Fu);
            break;
        case PHASE_WRITE:
            write_register(m, m->address, in, now);
            m->address = (uint8_t)((m->address + 1u) & 0x7Fu);
            break;
        case PHASE_MASK:
            m->mask = in;
            m->phase = PHASE_MODIFY;
            break;
        case PHASE_MODIFY: {
            uint8_t a = canonical(m->address);
            /* BIT MODIFY works on the bit-modifiable registers; elsewhere it writes the whole byte (datasheet) */
            write_register(m, a, (uint8_t)((m->reg[a] & ~m->mask) | (in & m->mask)), now);
            m->phase = PHASE_IGNORE;
            break;
        }
        case PHASE_STATUS:
            out = read_status(m);
            break;
        case PHASE_RX_STATUS:
            out = rx_status(m);
            break;
        default:
            break;
    }
    return out;
}

int mcp_model_int_level(const mcp2515_t *m) { return (m->reg[CANINTF] & m->reg[CANINTE]) ? 0 : 1; }

int mcp_model_on_bus(mcp2515_t *m, int module_index) {
    const uint8_t *r = m->reg;
    unsigned brp = r[CNF1] & 0x3Fu, prop = (r[CNF2] & 0x07u) + 1u, ps1 = ((r[CNF2] >> 3) & 0x07u) + 1u;
    unsigned ps2 = (r[CNF2] & 0x80u) ? (r[CNF3] & 0x07u) + 1u : (ps1 > 2u ? ps1 : 2u);
    unsigned tq_per_bit = 1u + prop + ps1 + ps2;
    unsigned long bitrate = 16000000ul / (2ul * (brp + 1ul) * tq_per_bit);
    if (mode(m) != MODE_NORMAL) return 0;
    if (bitrate != 1000000ul) {
        if (!m->warned_timing) {
            m->warned_timing = 1;
            fprintf(stderr, "aiko-avr-harness: module %d's MCP2515 runs at %lu bit/s (CNF 0x%02X 0x%02X 0x%02X), "
                    "not the bus's 1 Mbit/s: it stays off the bus\n", module_index, bitrate, r[CNF1], r[CNF2], r[CNF3]);
        }
        return 0;
    }
    return 1;
}

int mcp_model_pending(const mcp2515_t *m, can_frame_t *frame, uint64_t *request_cycle) {
    int b, best = -1;
    for (b = 2; b >= 0; b--) { /* equal TXP: the higher buffer number goes first */
        uint8_t ctrl = m->reg[TXB0CTRL + 0x10u * b];
        if ((ctrl & TXREQ) && (best < 0 || (ctrl & 3u) > (m->reg[TXB0CTRL + 0x10u * best] & 3u))) best = b;
    }
    if (best >= 0) {
        const uint8_t *t = &m->reg[TXB0CTRL + 0x10u * best + 1u]; /* SIDH SIDL EID8 EID0 DLC D0..D7 */
        frame->extended = (uint8_t)((t[1] & 0x08u) != 0u);
        frame->id = ((uint32_t)t[0] << 3) | (t[1] >> 5);
        if (frame->extended) frame->id = (frame->id << 18) | ((uint32_t)(t[1] & 3u) << 16) | ((uint32_t)t[2] << 8) | t[3];
        frame->remote = (uint8_t)((t[4] & 0x40u) != 0u);
        frame->dlc = (uint8_t)(t[4] & 0x0Fu);
        memcpy(frame->data, &t[5], 8);
        *request_cycle = m->tx_request_cycle[best];
    }
    return best;
}

void mcp_model_transmitted(mcp2515_t *m, int buffer) {
    m->reg[TXB0CTRL + 0x10u * buffer] &= (uint8_t)~TXREQ;
    m->reg[CANINTF] |= (uint8_t)(0x04u << buffer);
    m->frames_sent++;
}

static uint32_t filter_id(const uint8_t *f, int *extended) { /* a filter or mask: SIDH SIDL EID8 EID0 */
    uint32_t sid = ((uint32_t)f[0] << 3) | (f[1] >> 5);
    *extended = (f[1] & 0x08u) != 0u;
    return (sid << 18) | ((uint32_t)(f[1] & 3u) << 16) | ((uint32_t)f[2] << 8) | f[3];
}

static int filter_hit(const mcp2515_t *m, const can_frame_t *frame, uint8_t filter_address, uint8_t mask_address) {
    int filter_extended, ignored;
    uint32_t filter = filter_id(&m->reg[filter_address], &filter_extended);
    uint32_t mask = filter_id(&m->reg[mask_address], &ignored);
    uint32_t id = frame->extended ? frame->id : frame->id << 18;
    if (filter_extended != frame->extended) return 0;
    if (!frame->extended) mask &= 0x1FFC0000u; /* a standard frame compares the 11 SID bits only */
    return ((id ^ filter) & mask) == 0u;
}

static void store(mcp2515_t *m, int buffer, const can_frame_t *frame, uint8_t filter) {
    uint8_t *r = &m->reg[buffer ? 0x71u : 0x61u];
    uint32_t sid = frame->extended ? frame->id >> 18 : frame->id;
    r[0] = (uint8_t)(sid >> 3);
    r[1] = (uint8_t)(((sid & 7u) << 5) | (frame->extended ? 0x08u | ((frame->id >> 16) & 3u) : 0u) |
                     (!frame->extended && frame->remote ? 0x10u : 0u));
    r[2] = frame->extended ? (uint8_t)(frame->id >> 8) : 0u;
    r[3] = frame->extended ? (uint8_t)frame->id : 0u;
    r[4] = (uint8_t)((frame->extended && frame->remote ? 0x40u : 0u) | (frame->dlc & 0x0Fu));
    memcpy(&r[5], frame->data, 8);
    if (buffer) {
        m->reg[RXB1CTRL] = (uint8_t)((m->reg[RXB1CTRL] & 0x60u) | (frame->remote ? 0x08u : 0u) | filter);
        m->reg[CANINTF] |= RX1IF;
    } else {
        m->reg[RXB0CTRL] = (uint8_t)((m->reg[RXB0CTRL] & 0x64u) | (frame->remote ? 0x08u : 0u) | (filter & 1u));
        m->reg[CANINTF] |= RX0IF;
    }
    m->frames_received++;
}

void mcp_model_receive(mcp2515_t *m, const can_frame_t *frame) {
    static const uint8_t filters[6] = {0x00u, 0x04u, 0x08u, 0x10u, 0x14u, 0x18u};
    int hit0 = -1, hit1 = -1, f;
    int any0 = (m->reg[RXB0CTRL] & 0x60u) == 0x60u, any1 = (m->reg[RXB1CTRL] & 0x60u) == 0x60u;
    for (f = 0; f < 2 && hit0 < 0; f++) {
        if (any0 || filter_hit(m, frame, filters[f], 0x20u)) hit0 = f;
    }
    for (f = 2; f < 6 && hit1 < 0; f++) {
        if (any1 || filter_hit(m, frame, filters[f], 0x24u)) hit1 = f;
    }
    if (hit0 >= 0) {
        if (!(m->reg[CANINTF] & RX0IF)) {
            store(m, 0, frame, (uint8_t)hit0);
        } else if ((m->reg[RXB0CTRL] & 0x04u) && !(m->reg[CANINTF] & RX1IF)) { /* BUKT: roll over */
            store(m, 1, frame, (uint8_t)hit0);
        } else {
            m->reg[EFLG] |= (m->reg[RXB0CTRL] & 0x04u) ? 0x80u : 0x40u;
            m->reg[CANINTF] |= ERRIF;
        }
    } else if (hit1 >= 0) {
        if (!(m->reg[CANINTF] & RX1IF)) {
            store(m, 1, frame, (uint8_t)hit1);
        } else {
            m->reg[EFLG] |= 0x80u;
            m->reg[CANINTF] |= ERRIF;
        }
    }
}
