/*
 * main.c - the Aiko joint module firmware on the ATmega128 (16 MHz): the board (board.h) around joint_module.c.
 *
 * Interrupts do the urgent work and the main loop the rest, then sleeps (idle mode: timers, SPI and the external
 * interrupts keep running) until the next interrupt:
 *   TIMER0_COMP (1 kHz)  -> a controller tick is due
 *   INT0 (MCP2515 /INT)  -> frames into the receive queue; a valid EmergencyStop brakes both motors at once, there
 *                           (the state machine then handles it in order with the frames queued before it)
 *   INT4..7 (encoders)   -> count quadrature edges;  INT1/2 (H-bridge current limit) -> latch the flag
 * The main loop hands queued frames to the state machine, runs the tick, applies the duty, and resets the
 * hardware watchdog (armed at ~30 ms) only after a tick: a stuck tick or a flood that starves the loop resets the
 * module, and a module in reset brakes (the brake inputs are pulled up on the board).
 */
#include <avr/eeprom.h>
#include <avr/interrupt.h>
#include <avr/io.h>
#include <avr/sleep.h>
#include <avr/wdt.h>
#include <string.h>
#include <util/atomic.h>

#include "board.h"
#include "joint_module.h"
#include "mcp2515.h"

#define RX_QUEUE 16u

/* The module; its layout is read by the simulator harness (joint_module.h). */
jm_t g_module;

/* What else a debugger (the harness) reads: reset cause and the main loop's own counters. */
typedef struct __attribute__((packed)) {
    uint8_t reset_cause; /* MCUCSR at power-up: PORF 1, EXTRF 2, BORF 4, WDRF 8, JTRF 16 */
    uint8_t eeprom_ok;
    uint8_t can_ok;
    uint16_t tick_overruns; /* ticks that came due while the previous one still ran */
    uint16_t rx_dropped;    /* frames lost because the receive queue was full */
} board_status_t;

board_status_t g_board;

static jm_frame_t rx_queue[RX_QUEUE];
static volatile uint8_t rx_head, rx_tail;
static volatile uint8_t estops_queued; /* valid EmergencyStop frames received, not yet handled in order */
static volatile uint8_t ticks_due;
static volatile int16_t encoder_delta[2];
static volatile uint8_t current_limit_latch;
static int32_t position[2];

/* ------------------------------------------------------------------ drive */
static void brake_both(void) {
    PORTA |= (uint8_t)((1u << PA2) | (1u << PA3));
    OCR1A = 0u;
    OCR1B = 0u;
}

static void apply_duty(int16_t duty_h, int16_t duty_v) {
    uint16_t magnitude_h = (uint16_t)(duty_h < 0 ? -duty_h : duty_h);
    uint16_t magnitude_v = (uint16_t)(duty_v < 0 ? -duty_v : duty_v);
    uint8_t direction = (uint8_t)((duty_h < 0 ? (1u << PA0) : 0u) | (duty_v < 0 ? (1u << PA1) : 0u));
    PORTA = (uint8_t)((PORTA & ~((1u << PA0) | (1u << PA1))) | direction);
    OCR1A = magnitude_h;
    OCR1B = magnitude_v;
    PORTA &= (uint8_t)~((1u << PA2) | (1u << PA3));
}

/* The state machine's verdict, applied unless an emergency stop is still waiting in the queue. */
static void drive_update(uint8_t enabled) {
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE) {
        if (enabled && g_module.state == AIKO_STATE_ENABLED && estops_queued == 0u) {
            apply_duty(g_module.axis[0].duty, g_module.axis[1].duty);
        } else {
            brake_both();
        }
    }
}

/* ------------------------------------------------------------------ sensors */
static void positions_now(int32_t counts[2]) {
    int16_t delta[2];
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE) {
        delta[0] = encoder_delta[0];
        delta[1] = encoder_delta[1];
        encoder_delta[0] = encoder_delta[1] = 0;
    }
    position[0] += delta[0];
    position[1] += delta[1];
    counts[0] = position[0];
    counts[1] = position[1];
}

/* x4 quadrature: on an A edge the count goes up if A != B, on a B edge if A == B (board.h: H on PE4/5, V PE6/7) */
ISR(INT4_vect) { encoder_delta[0] += ((PINE >> PE4) ^ (PINE >> PE5)) & 1u ? 1 : -1; }
ISR(INT5_vect) { encoder_delta[0] += ((PINE >> PE4) ^ (PINE >> PE5)) & 1u ? -1 : 1; }
ISR(INT6_vect) { encoder_delta[1] += ((PINE >> PE6) ^ (PINE >> PE7)) & 1u ? 1 : -1; }
ISR(INT7_vect) { encoder_delta[1] += ((PINE >> PE6) ^ (PINE >> PE7)) & 1u ? -1 : 1; }

ISR(INT1_vect) { current_limit_latch |= 1u; }
ISR(INT2_vect) { current_limit_latch |= 2u; }

ISR(TIMER0_COMP_vect) {
    if (ticks_due < 255u) ticks_due++;
}

static uint16_t read_adc(uint8_t channel) {
    ADMUX = (uint8_t)((1u << REFS0) | channel); /* AVCC reference */
    ADCSRA = (uint8_t)((1u << ADEN) | (1u << ADSC) | (1u << ADIF) | 7u); /* f_osc / 128 = 125 kHz */
    while (!(ADCSRA & (1u << ADIF))) {
    }
    return ADC;
}

/* ------------------------------------------------------------------ CAN */
void mcp_received(const jm_frame_t *frame) { /* interrupt context */
    uint8_t next = (uint8_t)((rx_tail + 1u) % RX_QUEUE);
    uint8_t estop = (uint8_t)(frame->id == AIKO_ID_EMERGENCY_STOP && frame->flags == 0u &&
                              aiko_decode_emergency_stop(frame->data, frame->dlc) == AIKO_OK);
    if (estop) brake_both(); /* the drive is cut here, before anything else runs */
    if (next == rx_head) {
        g_board.rx_dropped++;
        if (estop) jm_emergency_stop(&g_module); /* never lose an e-stop, even out of order */
        return;
    }
    rx_queue[rx_tail] = *frame;
    rx_tail = next;
    if (estop) estops_queued++;
}

void jm_send(const jm_frame_t *frame) { mcp_send(frame); }

static void handle_received(void) {
    int32_t counts[2];
    while (rx_head != rx_tail) {
        const jm_frame_t *frame = &rx_queue[rx_head];
        uint8_t estop = (uint8_t)(frame->id == AIKO_ID_EMERGENCY_STOP && frame->flags == 0u &&
                                  aiko_decode_emergency_stop(frame->data, frame->dlc) == AIKO_OK);
        positions_now(counts);
        jm_on_frame(&g_module, frame, counts);
        ATOMIC_BLOCK(ATOMIC_RESTORESTATE) {
            rx_head = (uint8_t)((rx_head + 1u) % RX_QUEUE);
            if (estop) estops_queued--;
        }
        if (g_module.state != AIKO_STATE_ENABLED) drive_update(0u); /* a Disable brakes now, not a tick later */
    }
}

/* ------------------------------------------------------------------ set-up */
static uint8_t load_settings(uint8_t *node, float values[JM_PARAMETER_COUNT]) {
    uint8_t image[JM_EEPROM_SIZE];
    uint8_t sum = 0u, i;
    eeprom_read_block(image, (const void *)0, JM_EEPROM_SIZE);
    for (i = 0u; i + 1u < JM_EEPROM_SIZE; i++) sum = (uint8_t)(sum + image[i]);
    if (image[0] != JM_EEPROM_MAGIC0 || image[1] != JM_EEPROM_MAGIC1 || image[2] != JM_EEPROM_LAYOUT ||
        (uint8_t)(sum + image[JM_EEPROM_SIZE - 1u]) != 0u || image[3] < AIKO_NODE_MIN || image[3] > AIKO_NODE_MAX) {
        return 0u;
    }
    *node = image[3];
    memcpy(values, &image[4], sizeof(float) * JM_PARAMETER_COUNT);
    return 1u;
}

static void board_init(void) {
    /* H-bridges: brake first (PA2/PA3 high), direction low, then the PWM pins as outputs */
    PORTA = (uint8_t)((1u << PA2) | (1u << PA3));
    DDRA = (uint8_t)((1u << PA0) | (1u << PA1) | (1u << PA2) | (1u << PA3));
    DDRB |= (uint8_t)((1u << PB5) | (1u << PB6));
    /* Timer1: fast PWM, TOP = ICR1 (mode 14), no prescaler, non-inverting on OC1A/OC1B */
    ICR1 = JM_PWM_TOP;
    OCR1A = 0u;
    OCR1B = 0u;
    TCCR1A = (uint8_t)((1u << COM1A1) | (1u << COM1B1) | (1u << WGM11));
    TCCR1B = (uint8_t)((1u << WGM13) | (1u << WGM12) | (1u << CS10));
    /* encoders (PE4..7, inputs) on INT4..7, any edge; current-limit flags on INT1/INT2, rising edge */
    EICRB = (uint8_t)((1u << ISC40) | (1u << ISC50) | (1u << ISC60) | (1u << ISC70));
    EICRA = (uint8_t)((1u << ISC11) | (1u << ISC10) | (1u << ISC21) | (1u << ISC20));
    EIFR = 0xFEu;
    EIMSK = (uint8_t)((1u << INT1) | (1u << INT2) | (1u << INT4) | (1u << INT5) | (1u << INT6) | (1u << INT7));
    /* Timer0: CTC, f_osc / 64 / 250 = 1 kHz */
    OCR0 = (uint8_t)(F_CPU / 64u / JM_TICK_HZ - 1u);
    TCCR0 = (uint8_t)((1u << WGM01) | (1u << CS02));
    TIMSK |= (uint8_t)(1u << OCIE0);
}

int main(void) {
    uint8_t node = 0u;
    float values[JM_PARAMETER_COUNT];
    int32_t counts[2];
    g_board.reset_cause = MCUCSR;
    MCUCSR = 0u;
    wdt_enable(WDTO_30MS);
    board_init();
    g_board.eeprom_ok = load_settings(&node, values);
    position[0] = jm_pot_to_counts(read_adc(0u));
    position[1] = jm_pot_to_counts(read_adc(1u));
    ADCSRA = 0u; /* the ADC is not needed again */
    counts[0] = position[0];
    counts[1] = position[1];
    jm_init(&g_module, node, g_board.eeprom_ok ? values : 0, counts);
    if (g_board.eeprom_ok) g_board.can_ok = mcp_init(node);
    set_sleep_mode(SLEEP_MODE_IDLE);
    sei();
    for (;;) {
        uint8_t due;
        if (g_board.can_ok) handle_received();
        ATOMIC_BLOCK(ATOMIC_RESTORESTATE) {
            due = ticks_due;
            ticks_due = 0u;
        }
        if (due) {
            uint8_t limited, enabled;
            if (due > 1u) g_board.tick_overruns = (uint16_t)(g_board.tick_overruns + due - 1u);
            positions_now(counts);
            ATOMIC_BLOCK(ATOMIC_RESTORESTATE) {
                limited = (uint8_t)(current_limit_latch | ((PIND >> PD1) & 3u));
                current_limit_latch = 0u;
            }
            if (g_board.can_ok) {
                enabled = jm_tick(&g_module, counts, limited);
                drive_update(enabled);
            }
            wdt_reset();
        }
        cli();
        if (rx_head == rx_tail && ticks_due == 0u) {
            sleep_enable();
            sei(); /* the instruction after SEI runs before any interrupt: no wake-up is lost */
            sleep_cpu();
            sleep_disable();
        }
        sei();
    }
}
