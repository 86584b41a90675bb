/*
 * board.c - see board.h.
 *
 * Copyright (C) 2026 the Aiko stack authors. GPL-3.0-or-later (see ../LICENSE).
 */
#include "board.h"

#include <stdio.h>
#include <string.h>

#include <simavr/avr_adc.h>
#include <simavr/avr_eeprom.h>
#include <simavr/avr_extint.h>
#include <simavr/avr_ioport.h>
#include <simavr/sim_core.h>
#include <simavr/sim_cycle_timers.h>
#include <simavr/sim_elf.h>
#include <simavr/sim_io.h>

#include "protocol.h"

/* ATmega128 data-space addresses (I/O address + 0x20; datasheet "Register Summary", avr/iom128.h) */
#define R_PINE 0x21u
#define R_SPCR 0x2Du
#define R_SPSR 0x2Eu
#define R_SPDR 0x2Fu
#define R_PIND 0x30u
#define R_DDRB 0x37u
#define R_PORTB 0x38u
#define R_DDRA 0x3Au
#define R_PORTA 0x3Bu
#define R_ICR1L 0x46u
#define R_ICR1H 0x47u
#define R_OCR1BL 0x48u
#define R_OCR1BH 0x49u
#define R_OCR1AL 0x4Au
#define R_OCR1AH 0x4Bu
#define R_TCCR1B 0x4Eu
#define R_TCCR1A 0x4Fu

/* board.h of the firmware: the pins */
#define PIN_CS 0          /* PB0 */
#define PIN_PWM_H 5       /* PB5 OC1A */
#define PIN_PWM_V 6       /* PB6 OC1B */
#define PIN_DIR_H 0       /* PA0 */
#define PIN_BRAKE_H 2     /* PA2 */
#define PIN_CAN_INT 0     /* PD0 INT0 */
#define PIN_LIMIT_H 1     /* PD1 INT1, PD2 INT2 */
#define PIN_ENCODER_H_A 4 /* PE4..PE7: H A, H B, V A, V B */

static board_t *running; /* the board whose core runs now (simavr's sleep and reset hooks carry no parameter) */

/* ------------------------------------------------------------------ time accounting */
static void count_awake(board_t *b, uint64_t cycle_before, uint64_t cycles) {
    uint64_t window = cycle_before / BOARD_CYCLES_PER_MS;
    if (window != b->window) {
        if (b->window_awake > b->max_window_awake) b->max_window_awake = b->window_awake;
        b->window = window;
        b->window_awake = 0;
    }
    b->window_awake += (uint32_t)cycles;
    b->awake_cycles += cycles;
}

static void on_sleep(avr_t *avr, avr_cycle_count_t how_long) { /* never wait for the wall clock */
    (void)avr;
    if (running) {
        running->slept = 1;
        running->last_sleep = how_long;
    }
}

static avr_cycle_count_t stop_here(avr_t *avr, avr_cycle_count_t when, void *param) {
    (void)avr;
    (void)when;
    (void)param;
    return 0; /* only a timer: a sleeping core wakes from its sleep here, so the harness regains control */
}

/* ------------------------------------------------------------------ pins driven by the board */
static void drive_pin(board_t *b, avr_irq_t *irq, uint8_t pin_register, int bit, int level) {
    avr_raise_irq(irq, (uint32_t)level);
    /* also the PIN bit itself: after a reset the port's registers are cleared, the level on the wire is not */
    if (level) b->avr->data[pin_register] |= (uint8_t)(1u << bit);
    else b->avr->data[pin_register] &= (uint8_t)~(1u << bit);
}

void board_update_can_int(board_t *b) {
    drive_pin(b, b->pin_can_int, R_PIND, PIN_CAN_INT, mcp_model_int_level(&b->mcp));
}

static void show_encoder(board_t *b, int axis) { /* the count's quadrature phase on the A and B pins */
    static const uint8_t a_of_phase[4] = {0, 1, 1, 0}, b_of_phase[4] = {0, 0, 1, 1};
    int phase = (b->encoder_q8[axis] >> 8) & 3;
    drive_pin(b, b->pin_encoder[axis][0], R_PINE, PIN_ENCODER_H_A + 2 * axis, a_of_phase[phase]);
    drive_pin(b, b->pin_encoder[axis][1], R_PINE, PIN_ENCODER_H_A + 2 * axis + 1, b_of_phase[phase]);
}

static void show_inputs(board_t *b) {
    int axis;
    board_update_can_int(b);
    for (axis = 0; axis < 2; axis++) {
        show_encoder(b, axis);
        drive_pin(b, b->pin_current_limit[axis], R_PIND, PIN_LIMIT_H + axis, (b->current_limited >> axis) & 1);
        avr_raise_irq(b->adc_in + axis, b->pot_mv[axis]);
    }
}

/* ------------------------------------------------------------------ H-bridges */
static int32_t axis_duty_ppm(board_t *b, int axis) {
    const uint8_t *d = b->avr->data;
    int brake = PIN_BRAKE_H + axis, direction = PIN_DIR_H + axis, pwm = axis ? PIN_PWM_V : PIN_PWM_H;
    uint16_t icr = (uint16_t)(d[R_ICR1L] | (d[R_ICR1H] << 8));
    uint16_t ocr = axis ? (uint16_t)(d[R_OCR1BL] | (d[R_OCR1BH] << 8)) : (uint16_t)(d[R_OCR1AL] | (d[R_OCR1AH] << 8));
    int com = axis ? (d[R_TCCR1A] >> 4) & 3 : (d[R_TCCR1A] >> 6) & 3;
    int mode14 = (d[R_TCCR1A] & 3) == 2 && (d[R_TCCR1B] & 0x18) == 0x18;
    int32_t ppm;
    if (!(d[R_DDRA] & (1u << brake)) || (d[R_PORTA] & (1u << brake))) return 0; /* brake: pulled up on the board */
    if (!(d[R_DDRB] & (1u << pwm)) || (d[R_TCCR1B] & 7) == 0 || com == 0 || icr == 0) return 0; /* no PWM out */
    if (!mode14 || com != 2) {
        if (!b->warned_pwm) {
            b->warned_pwm = 1;
            fprintf(stderr, "aiko-avr-harness: module %d drives its PWM pins in a Timer1 mode the board model does not "
                    "read (TCCR1A 0x%02X TCCR1B 0x%02X); its motors get no voltage\n", b->index, d[R_TCCR1A],
                    d[R_TCCR1B]);
        }
        return 0;
    }
    if (ocr > icr) ocr = icr;
    ppm = (int32_t)((uint64_t)ocr * 1000000u / icr);
    return (d[R_DDRA] & (1u << direction)) && (d[R_PORTA] & (1u << direction)) ? -ppm : ppm;
}

static void integrate_duty(board_t *b) {
    uint64_t now = b->avr->cycle;
    int axis;
    if (now > b->duty_since) {
        for (axis = 0; axis < 2; axis++) b->duty_integral[axis] += (int64_t)b->duty_ppm[axis] * (int64_t)(now - b->duty_since);
        b->duty_since = now;
    }
}

static void drive_write(avr_t *avr, avr_io_addr_t address, uint8_t value, void *param) {
    board_t *b = param;
    unsigned i;
    integrate_duty(b); /* the old duty until now */
    for (i = 0; i < b->n_wrapped; i++) {
        if (b->wrapped[i].address == address) {
            if (b->wrapped[i].write) b->wrapped[i].write(avr, address, value, b->wrapped[i].param);
            else avr->data[address] = value;
            break;
        }
    }
    b->duty_ppm[0] = axis_duty_ppm(b, 0);
    b->duty_ppm[1] = axis_duty_ppm(b, 1);
}

static void wrap_write(board_t *b, uint16_t address) {
    avr_io_addr_t io = AVR_DATA_TO_IO(address);
    board_wrapped_write_t *w = &b->wrapped[b->n_wrapped++];
    w->address = address;
    w->write = b->avr->io[io].w.c;
    w->param = b->avr->io[io].w.param;
    b->avr->io[io].w.c = drive_write;
    b->avr->io[io].w.param = b;
}

/* ------------------------------------------------------------------ SPI and the MCP2515 */
static avr_cycle_count_t spi_byte_done(avr_t *avr, avr_cycle_count_t when, void *param) {
    board_t *b = param;
    avr_spi_t *p = b->spi;
    (void)when;
    if (avr_regbit_get(avr, p->spe) && avr_regbit_get(avr, p->mstr)) {
        uint8_t out = avr->data[p->r_spdr];
        p->input_data_register = b->mcp.selected ? mcp_model_spi(&b->mcp, out, avr->cycle) : 0xFFu;
        avr_raise_interrupt(avr, &p->spi);
        board_update_can_int(b);
    }
    return 0;
}

static void spdr_write(avr_t *avr, avr_io_addr_t address, uint8_t value, void *param) {
    board_t *b = param;
    avr_spi_t *p = b->spi;
    static const uint8_t divider[4] = {4, 16, 64, 128};
    unsigned sck = divider[avr->data[R_SPCR] & 3u];
    if (avr->data[R_SPSR] & 1u) sck /= 2u; /* SPI2X */
    avr_regbit_clear(avr, p->spi.raised);
    avr_core_watch_write(avr, address, value);
    avr_cycle_timer_register(avr, 8u * sck, spi_byte_done, b); /* 8 SCK periods per byte */
}

static void chip_select(struct avr_irq_t *irq, uint32_t value, void *param) {
    board_t *b = param;
    (void)irq;
    mcp_model_select(&b->mcp, value == 0);
    board_update_can_int(b);
}

/* simavr 1.6 polls a low INTn pin at every cycle while "strict level triggering" is on (its default, restored
 * by every reset), and keeps raising the interrupt even after the firmware has chosen an edge mode: an interrupt
 * storm on a pin that merely rests low. The board's firmware uses edges only, so the poll is switched off. */
static void no_level_polling(avr_t *avr) {
    uint8_t n;
    for (n = 0; n < 8; n++) avr_extint_set_strict_lvl_trig(avr, n, 0);
}

/* ------------------------------------------------------------------ reset */
static void on_core_reset(avr_t *avr) {
    board_t *b = running;
    if (b && b->core_reset) b->core_reset(avr);
    if (b && b->avr == avr) {
        b->resets++;
        b->reset_seen = 1;
        show_inputs(b);
    }
}

int board_init(board_t *b, int index, const void *firmware, const uint8_t *eeprom, unsigned eeprom_size,
               const int32_t position_q8[2], const uint16_t pot_mv[2]) {
    avr_t *avr = avr_make_mcu_by_name("atmega128");
    avr_eeprom_desc_t image;
    int axis;
    if (!avr) return -1;
    memset(b, 0, sizeof *b);
    b->avr = avr;
    b->index = index;
    avr_init(avr);
    avr_load_firmware(avr, (elf_firmware_t *)firmware);
    avr->frequency = 16000000u;
    avr->vcc = avr->avcc = avr->aref = 5000u;
    avr->log = LOG_ERROR;
    avr->sleep = on_sleep;
    b->core_reset = avr->reset;
    avr->reset = on_core_reset;
    image.ee = (uint8_t *)eeprom;
    image.offset = 0;
    image.size = eeprom_size;
    avr_ioctl(avr, AVR_IOCTL_EEPROM_SET, &image); /* simavr 1.6 answers -1 even when it worked: read it back */
    image.ee = NULL;
    if (avr_ioctl(avr, AVR_IOCTL_EEPROM_GET, &image) == -2 || !image.ee || memcmp(image.ee, eeprom, eeprom_size) != 0) {
        return -2;
    }

    b->spi = avr->io[AVR_DATA_TO_IO(R_SPDR)].w.param; /* simavr's avr_spi_t, registered on SPDR */
    avr->io[AVR_DATA_TO_IO(R_SPDR)].w.c = spdr_write;
    avr->io[AVR_DATA_TO_IO(R_SPDR)].w.param = b;
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('B'), PIN_CS), chip_select, b);
    wrap_write(b, R_PORTA);
    wrap_write(b, R_DDRA);
    wrap_write(b, R_DDRB);
    wrap_write(b, R_OCR1AL);
    wrap_write(b, R_OCR1BL);
    wrap_write(b, R_ICR1L);
    wrap_write(b, R_TCCR1A);
    wrap_write(b, R_TCCR1B);

    b->pin_can_int = avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('D'), PIN_CAN_INT);
    b->pin_current_limit[0] = avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('D'), PIN_LIMIT_H);
    b->pin_current_limit[1] = avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('D'), PIN_LIMIT_H + 1);
    for (axis = 0; axis < 2; axis++) {
        b->pin_encoder[axis][0] = avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('E'), PIN_ENCODER_H_A + 2 * axis);
        b->pin_encoder[axis][1] = avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('E'), PIN_ENCODER_H_A + 2 * axis + 1);
        b->encoder_q8[axis] = position_q8[axis];
        b->pot_mv[axis] = pot_mv[axis];
    }
    b->adc_in = avr_io_getirq(avr, AVR_IOCTL_ADC_GETIRQ, ADC_IRQ_ADC0);
    mcp_model_reset(&b->mcp);
    b->braked_in_period = 3;
    no_level_polling(avr);
    running = b;
    show_inputs(b);
    running = NULL;
    return 0;
}

void board_begin_step(board_t *b, uint64_t end_cycle, const int32_t position_q8[2], const uint16_t pot_mv[2],
                      uint8_t current_limited) {
    uint64_t start = b->avr->cycle, span = end_cycle > start ? end_cycle - start : 1u;
    int axis;
    integrate_duty(b);
    if (current_limited != b->current_limited) {
        b->current_limited = current_limited;
        for (axis = 0; axis < 2; axis++) {
            drive_pin(b, b->pin_current_limit[axis], R_PIND, PIN_LIMIT_H + axis, (current_limited >> axis) & 1);
        }
    }
    for (axis = 0; axis < 2; axis++) {
        /* the encoder count changes where the position crosses a multiple of 256 (1/256 count units) */
        int32_t from = b->encoder_q8[axis], to = position_q8[axis];
        int32_t count = from >> 8, last = to >> 8;
        int step = last > count ? 1 : -1;
        unsigned n = 0;
        while (count != last && n < BOARD_MAX_EDGES) {
            int32_t boundary = step > 0 ? (count + 1) * 256 : count * 256 - 1;
            double fraction = (double)(boundary - from) / (double)(to - from);
            b->edge_cycle[axis][n] = start + (uint64_t)(fraction * (double)span);
            b->edge_step[axis][n] = (int8_t)step;
            count += step;
            n++;
        }
        b->edge_count[axis] = n;
        b->edge_next[axis] = 0;
        b->edges += n;
        b->encoder_q8[axis] = (from & ~0xFF) | (to & 0xFF); /* the sub-count part now; whole counts edge by edge */
        if (pot_mv[axis] != b->pot_mv[axis]) {
            b->pot_mv[axis] = pot_mv[axis];
            avr_raise_irq(b->adc_in + axis, pot_mv[axis]);
        }
    }
}

static uint64_t next_edge(const board_t *b) {
    uint64_t next = UINT64_MAX;
    int axis;
    for (axis = 0; axis < 2; axis++) {
        if (b->edge_next[axis] < b->edge_count[axis] && b->edge_cycle[axis][b->edge_next[axis]] < next) {
            next = b->edge_cycle[axis][b->edge_next[axis]];
        }
    }
    return next;
}

static void apply_edges(board_t *b) {
    int axis;
    for (axis = 0; axis < 2; axis++) {
        while (b->edge_next[axis] < b->edge_count[axis] && b->edge_cycle[axis][b->edge_next[axis]] <= b->avr->cycle) {
            b->encoder_q8[axis] += 256 * b->edge_step[axis][b->edge_next[axis]++];
            show_encoder(b, axis);
        }
    }
}

void board_run_until(board_t *b, uint64_t cycle) {
    avr_t *avr = b->avr;
    running = b;
    while (avr->cycle < cycle && !b->crashed) {
        uint64_t target = next_edge(b);
        if (target > cycle) target = cycle;
        if (avr->cycle < target) avr_cycle_timer_register(avr, target - avr->cycle, stop_here, b);
        while (avr->cycle < target) {
            uint64_t before = avr->cycle;
            uint32_t resets = b->resets;
            int was_running = avr->state == cpu_Running;
            int state;
            b->slept = 0;
            state = avr_run(avr);
            if (b->resets != resets) { /* the reset has dropped every cycle timer, ours too, and restored the poll */
                no_level_polling(avr);
                if (avr->cycle < target) avr_cycle_timer_register(avr, target - avr->cycle, stop_here, b);
            }
            if (was_running) {
                uint64_t spent = avr->cycle - before;
                if (b->slept && spent > b->last_sleep) spent -= b->last_sleep + 1u; /* the jump over the sleep */
                count_awake(b, before, spent);
            }
            if (state == cpu_Done || state == cpu_Crashed) {
                b->crashed = 1;
                fprintf(stderr, "aiko-avr-harness: module %d stopped (simavr state %d) at cycle %llu, pc 0x%04x\n",
                        b->index, state, (unsigned long long)avr->cycle, avr->pc);
                break;
            }
        }
        apply_edges(b);
    }
    running = NULL;
}

void board_take_duty(board_t *b, int32_t duty_ppm[2]) {
    uint64_t span = b->avr->cycle > b->step_start ? b->avr->cycle - b->step_start : 0u;
    int axis;
    integrate_duty(b);
    for (axis = 0; axis < 2; axis++) {
        duty_ppm[axis] = span ? (int32_t)(b->duty_integral[axis] / (int64_t)span) : b->duty_ppm[axis];
        b->duty_integral[axis] = 0;
    }
    b->step_start = b->avr->cycle;
}

uint8_t board_brakes(const board_t *b) {
    const uint8_t *d = b->avr->data;
    uint8_t brakes = 0;
    if (!(d[R_DDRA] & (1u << PIN_BRAKE_H)) || (d[R_PORTA] & (1u << PIN_BRAKE_H))) brakes |= 1u;
    if (!(d[R_DDRA] & (2u << PIN_BRAKE_H)) || (d[R_PORTA] & (2u << PIN_BRAKE_H))) brakes |= 2u;
    return brakes;
}

uint8_t board_flags(board_t *b) {
    uint8_t flags = board_brakes(b); /* HARNESS_FLAG_BRAKE_H, _V are bits 0 and 1 */
    if (b->reset_seen) flags |= HARNESS_FLAG_RESET;
    if (b->crashed) flags |= HARNESS_FLAG_CRASHED;
    b->reset_seen = 0;
    return flags;
}
