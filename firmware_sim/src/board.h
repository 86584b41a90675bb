/*
 * board.h - one simulated joint module: an ATmega128 core (simavr) on the board of
 * firmware_protocol/firmware/board.h, with its MCP2515, encoders, potentiometers and H-bridge inputs.
 *
 * Copyright (C) 2026 the Aiko stack authors. GPL-3.0-or-later (see ../LICENSE).
 *
 * Two things of Debian's simavr 1.6 are worked around here, not patched: its SPI clocks every byte at a fixed
 * 100 us (the board runs SPI at f_osc/2: 1 us per byte), so the harness replaces the SPDR write handler with one
 * that takes the datasheet's 8 SCK periods; and its Timer1 mode 14 (fast PWM, TOP = ICR1) output pin is not
 * reliable, so the H-bridge duty is read from OCR1A/OCR1B/ICR1 and the direction and brake pins, and integrated
 * over time at every write to them.
 */
#ifndef HARNESS_BOARD_H
#define HARNESS_BOARD_H

#include <stdint.h>

#include <simavr/avr_spi.h>
#include <simavr/sim_avr.h>

#include "mcp2515_model.h"

#define BOARD_CYCLES_PER_MS 16000u
#define BOARD_MAX_EDGES 64u
#define BOARD_MAX_WRAPPED 10u

typedef struct {
    uint16_t address;
    avr_io_write_t write;
    void *param;
} board_wrapped_write_t;

typedef struct board {
    avr_t *avr;
    int index;
    mcp2515_t mcp;
    avr_spi_t *spi;
    avr_irq_t *pin_can_int, *pin_current_limit[2], *pin_encoder[2][2], *adc_in;
    /* encoders: the position the pins show (1/256 count) and the edges still to come in this step */
    int32_t encoder_q8[2];
    uint64_t edge_cycle[2][BOARD_MAX_EDGES];
    int8_t edge_step[2][BOARD_MAX_EDGES];
    unsigned edge_count[2], edge_next[2];
    uint16_t pot_mv[2];
    uint8_t current_limited;
    uint8_t limited_in_period, braked_in_period; /* internal plant: OR / AND over a controller period's sub-steps */
    /* H-bridges: signed duty (1e-6) now, and its integral since the step's start */
    int32_t duty_ppm[2];
    int64_t duty_integral[2];
    uint64_t duty_since, step_start; /* integrated until; averaged since */
    uint8_t warned_pwm;
    board_wrapped_write_t wrapped[BOARD_MAX_WRAPPED];
    unsigned n_wrapped;
    void (*core_reset)(avr_t *avr);
    /* statistics */
    uint64_t awake_cycles, window, stats_since;
    uint32_t window_awake, max_window_awake;
    uint32_t edges, resets;
    uint8_t reset_seen, crashed;
    avr_cycle_count_t last_sleep;
    uint8_t slept;
} board_t;

/* Build module `index` from the loaded firmware; eeprom: its identity and settings; positions in 1/256 count. */
int board_init(board_t *b, int index, const void *firmware, const uint8_t *eeprom, unsigned eeprom_size,
               const int32_t position_q8[2], const uint16_t pot_mv[2]);

/* The inputs of the next step: where the encoders will be at end_cycle (edges spread linearly until then), the
 * potentiometer voltages and the current-limit flags (held during the step). */
void board_begin_step(board_t *b, uint64_t end_cycle, const int32_t position_q8[2], const uint16_t pot_mv[2],
                      uint8_t current_limited);
void board_run_until(board_t *b, uint64_t cycle);
/* The signed duty averaged since the last call (or power-up), in 1e-6 of full duty. */
void board_take_duty(board_t *b, int32_t duty_ppm[2]);
/* HARNESS_FLAG_*: the brakes now, and whether the core was reset or stopped since the last call. */
uint8_t board_flags(board_t *b);
/* The brakes now: bit 0 H, bit 1 V. */
uint8_t board_brakes(const board_t *b);
/* The MCP2515's /INT after the bus changed its flags. */
void board_update_can_int(board_t *b);

#endif
