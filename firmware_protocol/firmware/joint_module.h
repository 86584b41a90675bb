/*
 * joint_module.h - the joint module's protocol state machine and controller, without hardware.
 *
 * Pure C99 on fixed-width integers (host-compilable: tests/firmware_protocol/firmware runs it with host gcc against
 * the Python emulator's state machine). The platform (main.c on the ATmega128) feeds it received frames and
 * encoder counts, calls jm_tick at 1 kHz, applies the duty it returns to the H-bridges and provides jm_send.
 *
 * The rules are docs/can_protocol.md's, in the order the Python emulator (firmware_protocol/emulator/modules.py)
 * applies them; every frame is packed and unpacked by aiko_joint.c.
 *
 * Fixed point (why: a float PD on two axes costs ~3000 cycles per tick on the AVR; this one ~600):
 *   angle      int32 in 1/256 encoder count ("q8 counts"; 1 count = 0.036 deg)
 *   rate       int32 in 1/65536 count per tick (estimate and reference; 9.6e-6 rad/s)
 *   voltage    PWM counts (JM_PWM_TOP = the 12 V supply) in 1/16 count inside the controller
 *   gains      Q12 factors from error to voltage, derived from the float parameters when they are written
 * -Os turns 32-bit shifts into loops of 6 cycles per bit, except whole bytes: the tick shifts by 8, 12 and 16 only.
 */
#ifndef AIKO_JOINT_MODULE_H
#define AIKO_JOINT_MODULE_H

#include <stdint.h>

#include "aiko_joint.h"
#include "board.h"

#ifdef __cplusplus
extern "C" {
#endif

#define JM_PARAMETER_COUNT 12u /* indices 1..12 (AIKO_PARAM_*) */

/* Rejection reasons, numbered as firmware_protocol.emulator.rules.REJECTION_REASONS. */
enum {
    JM_REJECT_WRONG_DLC = 0,
    JM_REJECT_OUT_OF_RANGE,
    JM_REJECT_STALE_SEQUENCE,
    JM_REJECT_DUPLICATE_SEQUENCE,
    JM_REJECT_SEQUENCE_JUMP,
    JM_REJECT_BAD_ESTOP_KEY,
    JM_REJECT_UNKNOWN_COMMAND,
    JM_REJECT_RESERVED_BITS,
    JM_REJECT_PARAMETER_WHILE_ENABLED,
    JM_REJECT_COUNT
};

#define JM_FRAME_EXTENDED 0x01u
#define JM_FRAME_REMOTE 0x02u

typedef struct {
    uint16_t id; /* 11-bit (or the low bits of a 29-bit id, with JM_FRAME_EXTENDED) */
    uint8_t dlc;
    uint8_t flags; /* JM_FRAME_* */
    uint8_t data[8];
} jm_frame_t;

/* One axis: what the controller uses every tick, within a pointer's 64-byte reach (the AVR's LDD/STD
 * displacement: fields further away cost an address computation at every access). */
typedef struct __attribute__((packed)) {
    int32_t reference_q8; /* as accepted (clamped to the limits then) */
    int32_t reference_rate_q16;
    int32_t rate_q16; /* the rate estimate */
    int16_t duty;     /* applied this tick, -JM_PWM_TOP..JM_PWM_TOP */
    /* derived from the reference and the parameters */
    int32_t feedforward_q4; /* the back-EMF feed-forward of the reference rate, per reference */
    int32_t previous_counts;
    int32_t limit_q8;
    int32_t kp_q12;
    int32_t error_max_counts; /* beyond it the P term stops growing (no int32 overflow): >= 90 deg, >= 7.8 kV */
    int32_t kd_q12;
    int32_t rate_hi_max; /* beyond (x 256) the D term stops growing (no int32 overflow): >= 900 deg/s */
} jm_axis_t;

/* The module. Packed, so that the host build and the AVR build have the same layout: the simulator harness reads
 * the fields up to `axis` from the AVR's RAM (a debugger's view, firmware_protocol/emulator/firmware.py
 * MODULE_LAYOUT, checked against offsetof by the tests). */
typedef struct __attribute__((packed)) {
    uint8_t node;
    uint8_t state; /* AIKO_STATE_* */
    uint8_t estop;
    uint8_t fault;
    uint8_t watchdog;
    uint8_t sequence_valid; /* a reference has been accepted since Enable */
    uint8_t last_sequence;
    uint8_t at_limit;  /* bit 0 H, bit 1 V */
    uint8_t saturated; /* bit 0 H, bit 1 V: of the last complete tick */
    uint32_t tick;     /* controller ticks completed since power-up */
    uint32_t last_valid_tick;
    uint32_t watchdog_trip_tick;
    uint32_t accepted_references; /* counters: 32 bits here, the low 16 bits on the wire (JointRates) */
    uint32_t ignored_while_disabled;
    uint32_t watchdog_trips;
    uint32_t parameter_writes_accepted;
    uint32_t unknown_frames;
    uint32_t rejected[JM_REJECT_COUNT];
    float parameter[JM_PARAMETER_COUNT]; /* parameter i at [i - 1], as written (read back exactly) */
    jm_axis_t axis[2]; /* H, V */
    /* derived from the parameters; private */
    uint16_t watchdog_limit_ticks; /* trip when more ticks than this have passed without a valid reference */
    uint16_t feedback_divisor;     /* ticks between feedback frames; 0 = none */
    uint16_t feedback_phase;       /* tick % feedback_divisor, kept incrementally (a 32-bit % costs ~600 cycles) */
    uint16_t heartbeat_phase;      /* tick % JM_TICK_HZ */
    uint8_t saturated_demand;      /* bits: this tick's demand beyond the supply */
    uint8_t enabled_this_tick;
} jm_t;

/* Initialise from the stored parameters (index i at values[i - 1]); values a write would refuse fall back to the
 * built-in defaults. counts: the encoder's (absolute) position now. */
void jm_init(jm_t *jm, uint8_t node, const float values[JM_PARAMETER_COUNT], const int32_t counts[2]);

/* A received frame, in the order received; counts = the encoder positions now (Enable holds there). May send a
 * ParameterReply (jm_send). */
void jm_on_frame(jm_t *jm, const jm_frame_t *frame, const int32_t counts[2]);

/* The emergency stop alone (valid EmergencyStop frame): callable from the receive interrupt, before any other
 * queued frame is handled. Idempotent. */
void jm_emergency_stop(jm_t *jm);

/* One controller tick: counts = encoder positions now; current_limited = bits of the axes whose H-bridge limited
 * the current since the last tick. Writes jm->duty; sends the frames due (jm_send). Returns 1 if the drive is
 * enabled after this tick (apply jm->duty), 0 if it must brake. */
uint8_t jm_tick(jm_t *jm, const int32_t counts[2], uint8_t current_limited);

/* Frames out: provided by the platform (a queue to the CAN controller on the AVR; a recorder in host tests). */
void jm_send(const jm_frame_t *frame);

/* Conversions, exposed for tests. */
int32_t jm_cdeg_to_q8(int16_t cdeg);
int16_t jm_counts_to_cdeg(int32_t counts);
int32_t jm_pot_to_counts(uint16_t adc);

#ifdef __cplusplus
}
#endif
#endif /* AIKO_JOINT_MODULE_H */
