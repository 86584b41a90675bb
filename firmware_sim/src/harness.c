/*
 * harness.c - aiko-avr-harness: N ATmega128 joint modules running the unmodified firmware ELF in simavr, each on
 * its board with an MCP2515, all on one CAN bus (1 Mbit/s, arbitration by identifier, exact frame lengths with bit
 * stuffing), stepped by the Python side over stdin/stdout (protocol.h).
 *
 * Copyright (C) 2026 the Aiko stack authors.
 * This program is free software: you can redistribute it and/or modify it under the terms of the GNU General
 * Public License as published by the Free Software Foundation, either version 3 of the License, or (at your
 * option) any later version (see ../LICENSE). It links simavr (GPL-3); the MIT-licensed Aiko package never links
 * it and only talks to this program over a pipe.
 *
 * The cores advance in quanta of at most 40 us of simulated time (shorter than the shortest CAN frame, 47 bits),
 * one after the other; a transmit request carries the cycle it was made at, and arbitration picks, among the
 * requests made before the bus went idle (or the start of frame), the lowest identifier. A frame is delivered to
 * every other controller and to the PC side at its end of frame, when every core has reached that cycle.
 */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <simavr/sim_avr.h>
#include <simavr/sim_elf.h>

#include "board.h"
#include "can_frame.h"
#include "plant.h"
#include "protocol.h"

#define MAX_MODULES 16
#define QUANTUM_CYCLES 640u /* 40 us */
#define CYCLES_PER_BIT 16u  /* 1 Mbit/s at 16 MHz */
#define INTERFRAME_BITS 3u
#define PC_QUEUE 4096u
#define PC_NODE (-1)

typedef struct {
    int active;
    int sender; /* module index, or PC_NODE */
    int buffer;
    can_frame_t frame;
    uint64_t end_cycle; /* end of frame: delivered here */
} in_flight_t;

static board_t boards[MAX_MODULES];
/* the internal plant (request 'K'): off until configured */
static int plant_on;
static plant_params_t plant;
static plant_state_t plant_states[MAX_MODULES];
static uint32_t substeps_per_period;
static uint64_t limited_periods[MAX_MODULES][2], driven_axis_periods;
static int n_modules;
static elf_firmware_t firmware;
static uint64_t now_cycle;
static struct {
    can_frame_t frame[PC_QUEUE];
    uint64_t request[PC_QUEUE];
    unsigned head, count;
} pc;
static in_flight_t flight;
static uint64_t bus_idle_at, bus_busy_cycles;
static uint32_t bus_frames, arbitration_losses, pc_dropped;
static int protocol_out; /* the real stdout; fd 1 goes to stderr so that nothing else can corrupt the protocol */

/* output frames of the current step */
static uint8_t *out_frames;
static size_t out_count, out_capacity;

/* ------------------------------------------------------------------ I/O */
static void die(const char *message) {
    fprintf(stderr, "aiko-avr-harness: %s\n", message);
    exit(2);
}

static int read_exact(void *buffer, size_t size) {
    uint8_t *p = buffer;
    while (size) {
        ssize_t got = read(0, p, size);
        if (got == 0) return 0;
        if (got < 0) {
            if (errno == EINTR) continue;
            return 0;
        }
        p += got;
        size -= (size_t)got;
    }
    return 1;
}

static void write_exact(const void *buffer, size_t size) {
    const uint8_t *p = buffer;
    while (size) {
        ssize_t put = write(protocol_out, p, size);
        if (put < 0) {
            if (errno == EINTR) continue;
            exit(0); /* the Python side is gone */
        }
        p += put;
        size -= (size_t)put;
    }
}

static void reply(uint8_t status, const void *payload, uint32_t length) {
    uint8_t header[5];
    header[0] = status;
    memcpy(&header[1], &length, 4);
    write_exact(header, 5);
    if (length) write_exact(payload, length);
}

static void reply_two(const void *first, size_t first_length, const void *second, size_t second_length) {
    uint8_t header[5];
    uint32_t length = (uint32_t)(first_length + second_length);
    header[0] = 0;
    memcpy(&header[1], &length, 4);
    write_exact(header, 5);
    write_exact(first, first_length);
    if (second_length) write_exact(second, second_length);
}

static void reply_error(const char *message) { reply(1, message, (uint32_t)strlen(message)); }

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static int32_t get_i32(const uint8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* ------------------------------------------------------------------ ELF symbols (for peek) */
static int find_symbol(const char *path, const char *name, uint16_t *address, uint16_t *size) {
    int fd = open(path, O_RDONLY), found = 0;
    Elf *elf;
    Elf_Scn *section = NULL;
    if (fd < 0) return 0;
    elf_version(EV_CURRENT);
    elf = elf_begin(fd, ELF_C_READ, NULL);
    while (elf && !found && (section = elf_nextscn(elf, section)) != NULL) {
        GElf_Shdr header;
        Elf_Data *data;
        size_t i;
        if (!gelf_getshdr(section, &header) || header.sh_type != SHT_SYMTAB) continue;
        data = elf_getdata(section, NULL);
        for (i = 0; data && i < header.sh_size / header.sh_entsize; i++) {
            GElf_Sym symbol;
            const char *symbol_name;
            if (!gelf_getsym(data, (int)i, &symbol)) continue;
            symbol_name = elf_strptr(elf, header.sh_link, symbol.st_name);
            if (symbol_name && strcmp(symbol_name, name) == 0) {
                *address = (uint16_t)(symbol.st_value & 0xFFFFu); /* data symbols sit at 0x800000 + address */
                *size = (uint16_t)symbol.st_size;
                found = 1;
                break;
            }
        }
    }
    if (elf) elf_end(elf);
    close(fd);
    return found;
}

/* ------------------------------------------------------------------ the bus */
static void emit_to_pc(const can_frame_t *frame, int module, uint64_t cycle) {
    uint8_t *p;
    uint32_t id = frame->id | (frame->extended ? HARNESS_ID_EXTENDED : 0u) | (frame->remote ? HARNESS_ID_REMOTE : 0u);
    if (out_count == out_capacity) {
        out_capacity = out_capacity ? 2 * out_capacity : 256;
        out_frames = realloc(out_frames, out_capacity * HARNESS_FRAME_OUT);
        if (!out_frames) die("out of memory");
    }
    p = out_frames + out_count++ * HARNESS_FRAME_OUT;
    memcpy(p, &cycle, 8);
    memcpy(p + 8, &id, 4);
    p[12] = frame->dlc;
    p[13] = (uint8_t)module;
    memcpy(p + 14, frame->data, 8);
}

static void deliver(void) {
    int m;
    for (m = 0; m < n_modules; m++) {
        if (m == flight.sender) {
            mcp_model_transmitted(&boards[m].mcp, flight.buffer);
        } else if (mcp_model_on_bus(&boards[m].mcp, m)) {
            mcp_model_receive(&boards[m].mcp, &flight.frame);
        }
        board_update_can_int(&boards[m]);
    }
    if (flight.sender != PC_NODE) emit_to_pc(&flight.frame, flight.sender, flight.end_cycle);
    bus_frames++;
    bus_idle_at = flight.end_cycle + INTERFRAME_BITS * CYCLES_PER_BIT;
    flight.active = 0;
}

/* Deliver what ended by `cycle`, then start the next frame if a node was waiting when the bus went idle. */
static void bus_process(uint64_t cycle) {
    can_frame_t candidate[MAX_MODULES + 1], best;
    uint64_t request[MAX_MODULES + 1], start = UINT64_MAX;
    int sender[MAX_MODULES + 1], buffer[MAX_MODULES + 1], n = 0, i, winner = -1;
    if (flight.active && flight.end_cycle <= cycle) deliver();
    if (flight.active) return;
    for (i = 0; i < n_modules; i++) {
        if (!mcp_model_on_bus(&boards[i].mcp, i)) continue;
        buffer[n] = mcp_model_pending(&boards[i].mcp, &candidate[n], &request[n]);
        if (buffer[n] >= 0) sender[n++] = i;
    }
    if (pc.count) {
        candidate[n] = pc.frame[pc.head];
        request[n] = pc.request[pc.head];
        buffer[n] = 0;
        sender[n++] = PC_NODE;
    }
    for (i = 0; i < n; i++) {
        if (request[i] < start) start = request[i];
    }
    if (n == 0) return;
    if (start < bus_idle_at) start = bus_idle_at;
    if (start > cycle) return; /* the next frame starts in the next quantum */
    for (i = 0; i < n; i++) { /* the nodes ready at the start of frame (within its first bit) arbitrate */
        if (request[i] > start + CYCLES_PER_BIT) continue;
        if (winner < 0 || can_wins(&candidate[i], &best)) {
            if (winner >= 0) arbitration_losses++;
            winner = i;
            best = candidate[i];
        } else {
            arbitration_losses++;
        }
    }
    flight.active = 1;
    flight.sender = sender[winner];
    flight.buffer = buffer[winner];
    flight.frame = best;
    flight.end_cycle = start + (uint64_t)can_frame_bits(&best) * CYCLES_PER_BIT;
    bus_busy_cycles += (uint64_t)(can_frame_bits(&best) + INTERFRAME_BITS) * CYCLES_PER_BIT;
    if (flight.sender == PC_NODE) {
        pc.head = (pc.head + 1u) % PC_QUEUE;
        pc.count--;
    }
}

static void run_until(uint64_t end) {
    while (now_cycle < end) {
        uint64_t next = now_cycle + QUANTUM_CYCLES;
        int m;
        if (next > end) next = end;
        if (flight.active && flight.end_cycle < next) next = flight.end_cycle;
        for (m = 0; m < n_modules; m++) board_run_until(&boards[m], next);
        now_cycle = next;
        bus_process(now_cycle);
    }
}

/* A frame from the PC (HARNESS_FRAME_IN) at its adapter's queue, ready now; a full queue drops it, counted. */
static void queue_pc_frame(const uint8_t *f) {
    uint32_t id = get_u32(f);
    can_frame_t *frame;
    if (pc.count == PC_QUEUE) {
        pc_dropped++;
        return;
    }
    frame = &pc.frame[(pc.head + pc.count) % PC_QUEUE];
    frame->extended = (id & HARNESS_ID_EXTENDED) != 0u;
    frame->remote = (id & HARNESS_ID_REMOTE) != 0u;
    frame->id = id & 0x1FFFFFFFu;
    frame->dlc = f[4];
    memcpy(frame->data, f + 6, 8);
    pc.request[(pc.head + pc.count) % PC_QUEUE] = now_cycle;
    pc.count++;
}

/* ------------------------------------------------------------------ commands */
static void command_init(const uint8_t *p, uint32_t length, const char *elf_path) {
    const unsigned per_module = HARNESS_EEPROM_BYTES + 8 + 4;
    uint16_t out[5] = {0}, unused_size;
    int m;
    if (length < 1 || length != 1u + p[0] * per_module) return reply_error("init: bad length");
    if (n_modules) return reply_error("init: already initialised");
    if (p[0] < 1 || p[0] > MAX_MODULES) return reply_error("init: 1..16 modules");
    if (!find_symbol(elf_path, "g_module", &out[0], &out[1]) || !find_symbol(elf_path, "g_board", &out[2], &out[3]) ||
        !find_symbol(elf_path, "mcp_stats", &out[4], &unused_size)) {
        return reply_error("init: the ELF has no g_module / g_board / mcp_stats symbol (not the Aiko joint firmware?)");
    }
    for (m = 0; m < p[0]; m++) {
        const uint8_t *q = p + 1 + m * per_module;
        int32_t position[2] = {get_i32(q + HARNESS_EEPROM_BYTES), get_i32(q + HARNESS_EEPROM_BYTES + 4)};
        uint16_t pot[2] = {get_u16(q + HARNESS_EEPROM_BYTES + 8), get_u16(q + HARNESS_EEPROM_BYTES + 10)};
        if (board_init(&boards[m], m, &firmware, q, HARNESS_EEPROM_BYTES, position, pot) != 0) {
            return reply_error("init: simavr could not build an atmega128");
        }
    }
    n_modules = p[0];
    reply(0, out, sizeof out);
}

static void command_step(const uint8_t *p, uint32_t length) {
    const unsigned per_module = 8 + 4 + 1;
    uint64_t start = now_cycle, end;
    unsigned n_frames, n_sub, i, s;
    int m;
    static uint8_t *payload;
    static size_t payload_capacity;
    size_t size, o;
    if (!n_modules) return reply_error("step before init");
    if (length < 9u + n_modules * per_module + 2u) return reply_error("step: bad length");
    end = get_u64(p);
    n_sub = p[8];
    n_frames = get_u16(p + 9 + n_modules * per_module);
    if (length != 9u + n_modules * per_module + 2u + n_frames * HARNESS_FRAME_IN) return reply_error("step: bad length");
    if (end <= now_cycle || n_sub < 1) return reply_error("step: time must go forward in at least one sub-step");
    for (m = 0; m < n_modules; m++) {
        const uint8_t *q = p + 9 + m * per_module;
        int32_t position[2] = {get_i32(q), get_i32(q + 4)};
        uint16_t pot[2] = {get_u16(q + 8), get_u16(q + 10)};
        board_begin_step(&boards[m], end, position, pot, q[12]);
    }
    for (i = 0; i < n_frames; i++) queue_pc_frame(p + 9 + n_modules * per_module + 2 + i * HARNESS_FRAME_IN);
    size = 8u + (size_t)n_modules * (8u * n_sub + 1u) + 2u;
    if (size > payload_capacity) {
        payload = realloc(payload, size);
        payload_capacity = size;
        if (!payload) die("out of memory");
    }
    out_count = 0;
    bus_process(now_cycle);
    for (s = 1; s <= n_sub; s++) { /* each sub-step's average duty: the plant's physics steps */
        run_until(start + (end - start) * s / n_sub);
        for (m = 0; m < n_modules; m++) {
            int32_t duty[2];
            board_take_duty(&boards[m], duty);
            memcpy(payload + 8 + m * (8u * n_sub + 1u) + 8u * (s - 1u), duty, 8);
        }
    }
    memcpy(payload, &now_cycle, 8);
    for (m = 0; m < n_modules; m++) payload[8 + m * (8u * n_sub + 1u) + 8u * n_sub] = board_flags(&boards[m]);
    o = 8u + (size_t)n_modules * (8u * n_sub + 1u);
    {
        uint16_t count = (uint16_t)out_count;
        memcpy(payload + o, &count, 2);
    }
    reply_two(payload, size, out_frames, out_count * HARNESS_FRAME_OUT);
}

/* ------------------------------------------------------------------ the internal plant */
static double get_f64(const uint8_t *p) { double v; memcpy(&v, p, 8); return v; }

static int32_t position_q8(double angle_rad) { return (int32_t)llround(angle_rad * 10000.0 / (2.0 * M_PI) * 256.0); }

static uint16_t pot_mv(double angle_rad) { /* board.h: 0 V at -150 deg, AVCC at +150 deg */
    double fraction = (angle_rad * 180.0 / M_PI + 150.0) / 300.0;
    double mv = nearbyint(fraction * 5000.0);
    return (uint16_t)(mv < 0.0 ? 0.0 : (mv > 5000.0 ? 5000.0 : mv));
}

static void command_plant(const uint8_t *p, uint32_t length) {
    const unsigned head = 16 * 8 + 4 + 1, per_module = 8 * 8;
    int m, a;
    if (!n_modules) return reply_error("plant before init");
    if (length != head + n_modules * per_module) return reply_error("plant: bad length");
    plant.substep_s = get_f64(p);
    plant.half_free_play_rad = get_f64(p + 8);
    plant.contact_stiffness = get_f64(p + 16);
    plant.contact_damping = get_f64(p + 24);
    plant.supply_v = get_f64(p + 32);
    plant.resistance_ohm = get_f64(p + 40);
    plant.back_emf_v_s = get_f64(p + 48);
    plant.current_limit_a = get_f64(p + 56);
    plant.torque_per_amp = get_f64(p + 64);
    plant.gear_viscous = get_f64(p + 72);
    plant.reflected_inertia = get_f64(p + 80);
    plant.inertia = get_f64(p + 88);
    plant.damping = get_f64(p + 96);
    plant.limit_rad[0] = get_f64(p + 104);
    plant.limit_rad[1] = get_f64(p + 112);
    /* p + 120: reserved (0) */
    substeps_per_period = get_u32(p + 128);
    plant.sensor_joint = p[132];
    if (substeps_per_period < 1 || !(plant.substep_s > 0.0)) return reply_error("plant: bad sub-step");
    for (m = 0; m < n_modules; m++) {
        const uint8_t *q = p + head + m * per_module;
        for (a = 0; a < 2; a++) {
            plant_states[m].gear_angle[a] = get_f64(q + 32 * a);
            plant_states[m].gear_rate[a] = get_f64(q + 32 * a + 8);
            plant_states[m].joint_angle[a] = get_f64(q + 32 * a + 16);
            plant_states[m].joint_rate[a] = get_f64(q + 32 * a + 24);
        }
        plant_states[m].limited = 0;
    }
    plant_on = 1;
    reply(0, NULL, 0);
}

/* 'R': run to t_end on the internal plant, one physics sub-step after the other: per sub-step, the encoders move
 * along the measured angle's prediction (angle + rate x dt), the cores and the bus run, and the drives and joints
 * integrate the sub-step with its average duty. */
static void command_run(const uint8_t *p, uint32_t length) {
    uint64_t end;
    unsigned n_frames, i;
    int m, a;
    static uint8_t *payload;
    static size_t payload_capacity;
    static uint32_t substep_index;
    size_t size, per_module = 8 * 4 * 2 + 1 + 1 + 8;
    static int32_t last_duty[MAX_MODULES][2];
    uint64_t substep_cycles;
    if (!plant_on) return reply_error("run: no plant (request 'K')");
    if (length < 10) return reply_error("run: bad length");
    end = get_u64(p);
    n_frames = get_u16(p + 8);
    if (length != 10u + n_frames * HARNESS_FRAME_IN) return reply_error("run: bad length");
    substep_cycles = (uint64_t)llround(plant.substep_s * 16e6);
    if (end <= now_cycle || (end - now_cycle) % substep_cycles != 0) {
        return reply_error("run: time must go forward by whole sub-steps");
    }
    for (i = 0; i < n_frames; i++) queue_pc_frame(p + 10 + i * HARNESS_FRAME_IN);
    out_count = 0;
    bus_process(now_cycle);
    while (now_cycle < end) {
        uint64_t next = now_cycle + substep_cycles;
        for (m = 0; m < n_modules; m++) {
            plant_state_t *s = &plant_states[m];
            int32_t position[2];
            uint16_t pot[2];
            for (a = 0; a < 2; a++) {
                double angle = plant_measured_angle(&plant, s, a);
                position[a] = position_q8(angle + plant_measured_rate(&plant, s, a) * plant.substep_s);
                pot[a] = pot_mv(angle);
            }
            board_begin_step(&boards[m], next, position, pot, s->limited);
        }
        run_until(next);
        for (m = 0; m < n_modules; m++) {
            int32_t duty_ppm[2];
            double duty[2];
            uint8_t flags;
            board_take_duty(&boards[m], duty_ppm);
            last_duty[m][0] = duty_ppm[0];
            last_duty[m][1] = duty_ppm[1];
            duty[0] = duty_ppm[0] * 1e-6;
            duty[1] = duty_ppm[1] * 1e-6;
            plant_substep(&plant, &plant_states[m], duty);
            boards[m].limited_in_period |= plant_states[m].limited;
            flags = board_brakes(&boards[m]);
            boards[m].braked_in_period &= flags;
        }
        if (++substep_index >= substeps_per_period) { /* a controller period's worth: the current-limit counts */
            substep_index = 0;
            for (m = 0; m < n_modules; m++) {
                for (a = 0; a < 2; a++) {
                    int driven = !(boards[m].braked_in_period & (1u << a));
                    if (driven && (boards[m].limited_in_period & (1u << a))) limited_periods[m][a]++;
                    driven_axis_periods += (uint64_t)driven;
                }
                boards[m].limited_in_period = 0;
                boards[m].braked_in_period = 3;
            }
        }
    }
    size = 8u + (size_t)n_modules * per_module + 8u + (size_t)n_modules * 16u + 2u;
    if (size > payload_capacity) {
        payload = realloc(payload, size);
        payload_capacity = size;
        if (!payload) die("out of memory");
    }
    memcpy(payload, &now_cycle, 8);
    for (m = 0; m < n_modules; m++) {
        uint8_t *q = payload + 8 + m * per_module;
        for (a = 0; a < 2; a++) {
            memcpy(q + 32 * a, &plant_states[m].gear_angle[a], 8);
            memcpy(q + 32 * a + 8, &plant_states[m].gear_rate[a], 8);
            memcpy(q + 32 * a + 16, &plant_states[m].joint_angle[a], 8);
            memcpy(q + 32 * a + 24, &plant_states[m].joint_rate[a], 8);
        }
        q[64] = board_flags(&boards[m]);
        q[65] = plant_states[m].limited;
        memcpy(q + 66, last_duty[m], 8);
    }
    {
        uint8_t *q = payload + 8 + n_modules * per_module;
        uint16_t count = (uint16_t)out_count;
        memcpy(q, &driven_axis_periods, 8);
        for (m = 0; m < n_modules; m++) {
            uint32_t limited[2] = {(uint32_t)limited_periods[m][0], (uint32_t)limited_periods[m][1]};
            memcpy(q + 8 + 16 * m, limited, 8);
            memset(q + 16 + 16 * m, 0, 8);
        }
        memcpy(q + 8 + 16 * n_modules, &count, 2);
    }
    reply_two(payload, size, out_frames, out_count * HARNESS_FRAME_OUT);
}

static void command_peek(const uint8_t *p, uint32_t length) {
    uint16_t address, size;
    if (length != 5 || p[0] >= n_modules) return reply_error("peek: bad request");
    address = get_u16(p + 1);
    size = get_u16(p + 3);
    if ((uint32_t)address + size > (uint32_t)boards[p[0]].avr->ramend + 1u) return reply_error("peek: out of SRAM");
    reply(0, boards[p[0]].avr->data + address, size);
}

static void command_poke(const uint8_t *p, uint32_t length) {
    avr_t *avr;
    uint16_t address;
    if (length != 4 || p[0] >= n_modules) return reply_error("poke: bad request");
    avr = boards[p[0]].avr;
    address = get_u16(p + 1);
    if (address < 0x20u || address >= 0x100u) return reply_error("poke: only I/O registers (0x20..0xFF)");
    if (avr->io[AVR_DATA_TO_IO(address)].w.c) avr->io[AVR_DATA_TO_IO(address)].w.c(avr, address, p[3], avr->io[AVR_DATA_TO_IO(address)].w.param);
    else avr->data[address] = p[3];
    reply(0, NULL, 0);
}

static void command_stats(const uint8_t *p, uint32_t length) {
    uint8_t payload[MAX_MODULES * 36 + 16];
    size_t o = 0;
    int m;
    for (m = 0; m < n_modules; m++) {
        board_t *b = &boards[m];
        uint64_t total = b->avr->cycle - b->stats_since;
        uint32_t max_window = b->window_awake > b->max_window_awake ? b->window_awake : b->max_window_awake;
        memcpy(payload + o, &b->awake_cycles, 8);
        memcpy(payload + o + 8, &total, 8);
        memcpy(payload + o + 16, &max_window, 4);
        memcpy(payload + o + 20, &b->edges, 4);
        memcpy(payload + o + 24, &b->mcp.frames_sent, 4);
        memcpy(payload + o + 28, &b->mcp.frames_received, 4);
        memcpy(payload + o + 32, &b->resets, 4);
        o += 36;
    }
    memcpy(payload + o, &bus_busy_cycles, 8);
    memcpy(payload + o + 8, &bus_frames, 4);
    memcpy(payload + o + 12, &arbitration_losses, 4);
    reply(0, payload, (uint32_t)(o + 16));
    if (length == 1 && p[0] == 1) { /* start counting afresh (after the power-up, say) */
        for (m = 0; m < n_modules; m++) {
            board_t *b = &boards[m];
            b->awake_cycles = 0;
            b->stats_since = b->avr->cycle;
            b->window_awake = b->max_window_awake = 0;
            b->window = b->avr->cycle / BOARD_CYCLES_PER_MS;
            b->edges = 0;
            b->mcp.frames_sent = b->mcp.frames_received = 0;
        }
        bus_busy_cycles = 0;
        bus_frames = arbitration_losses = 0;
    }
}

int main(int argc, char **argv) {
    uint8_t header[5];
    static uint8_t *payload;
    static size_t capacity;
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: aiko-avr-harness FIRMWARE.elf\n"
                        "  N simulated ATmega128 joint modules on one CAN bus, stepped over stdin/stdout\n"
                        "  (protocol: firmware_sim/src/protocol.h). GPL-3.0-or-later; built on simavr.\n");
        return argc == 2 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
    }
    protocol_out = dup(1);
    dup2(2, 1); /* simavr prints to stdout; that must not reach the protocol */
    if (elf_read_firmware(argv[1], &firmware) != 0) {
        fprintf(stderr, "aiko-avr-harness: cannot read the firmware %s\n", argv[1]);
        return 2;
    }
    while (read_exact(header, 5)) {
        uint32_t length = get_u32(header + 1);
        if (length > 1u << 24) die("request too long");
        if (length > capacity) {
            payload = realloc(payload, length);
            capacity = length;
            if (!payload) die("out of memory");
        }
        if (length && !read_exact(payload, length)) break;
        switch (header[0]) {
            case 'I': command_init(payload, length, argv[1]); break;
            case 'S': command_step(payload, length); break;
            case 'K': command_plant(payload, length); break;
            case 'R': command_run(payload, length); break;
            case 'P': command_peek(payload, length); break;
            case 'W': command_poke(payload, length); break;
            case 'T': command_stats(payload, length); break;
            case 'Q': reply(0, NULL, 0); return 0;
            default: reply_error("unknown request");
        }
    }
    return 0;
}
