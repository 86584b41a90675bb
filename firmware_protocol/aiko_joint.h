/*
 * aiko_joint.h - firmware side of the Aiko joint-controller CAN protocol (ATmega128, also host-compilable).
 *
 * The protocol is defined by aiko_joint.dbc; this header restates its ids and layouts for C and is checked
 * against it: tests/firmware_protocol/test_c_codec.py compares these constants with the DBC and the bytes produced
 * here with the Python codec on firmware_protocol/vectors.json. Values are raw fixed-point integers, as the
 * firmware computes with them (no floating point in the control loop):
 *   angles    int16 centidegrees (0.01 deg), valid -18000..18000 (+-180 deg)
 *   ref rates int12 quarter degrees per second (0.25 deg/s), -2048..2047
 *   fb rates  int16 in 0.05 deg/s
 *   effort    int8 percent of full duty, -100..100
 * All signals are little-endian (Intel); frame id = base + node (node 1..10).
 */
#ifndef AIKO_JOINT_H
#define AIKO_JOINT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AIKO_ID_EMERGENCY_STOP 0x000u /* highest priority on the bus */
#define AIKO_ID_COMMAND 0x010u
#define AIKO_ID_REFERENCE_BASE 0x100u
#define AIKO_ID_FEEDBACK_BASE 0x200u
#define AIKO_ID_RATES_BASE 0x280u
#define AIKO_ID_PARAMETER_REPLY_BASE 0x580u
#define AIKO_ID_PARAMETER_REQUEST_BASE 0x600u
#define AIKO_ID_HEARTBEAT_BASE 0x700u
#define AIKO_NODE_MIN 1u
#define AIKO_NODE_MAX 10u

#define AIKO_DLC_EMERGENCY_STOP 1u
#define AIKO_DLC_COMMAND 2u
#define AIKO_DLC_REFERENCE 8u
#define AIKO_DLC_FEEDBACK 8u
#define AIKO_DLC_RATES 8u
#define AIKO_DLC_PARAMETER 8u
#define AIKO_DLC_HEARTBEAT 4u

#define AIKO_ESTOP_KEY 0xA5u
#define AIKO_ANGLE_CDEG_MAX 18000
#define AIKO_EFFORT_PCT_MAX 100

#define AIKO_CMD_ENABLE 1u
#define AIKO_CMD_DISABLE 2u
#define AIKO_CMD_CLEAR_FAULTS 3u

#define AIKO_STATE_BOOT 0u
#define AIKO_STATE_DISABLED 1u
#define AIKO_STATE_ENABLED 2u
#define AIKO_STATE_FAULT 3u
#define AIKO_STATE_WATCHDOG 4u
#define AIKO_STATE_ESTOP 5u

/* Parameter indices (ParameterRequest.Index) and results (ParameterReply.Result). */
#define AIKO_PARAM_KP_H 1u
#define AIKO_PARAM_KD_H 2u
#define AIKO_PARAM_KP_V 3u
#define AIKO_PARAM_KD_V 4u
#define AIKO_PARAM_LIMIT_H_DEG 5u
#define AIKO_PARAM_LIMIT_V_DEG 6u
#define AIKO_PARAM_WATCHDOG_PERIODS 7u
#define AIKO_PARAM_REFERENCE_PERIOD_MS 8u
#define AIKO_PARAM_FEEDBACK_RATE_HZ 9u
#define AIKO_PARAM_TORQUE_LIMIT_H_NM 10u
#define AIKO_PARAM_TORQUE_LIMIT_V_NM 11u
#define AIKO_PARAM_FREE_PLAY_DEG 12u
#define AIKO_RESULT_OK 0u
#define AIKO_RESULT_UNKNOWN_INDEX 1u
#define AIKO_RESULT_OUT_OF_RANGE 2u
#define AIKO_RESULT_READ_ONLY 3u
#define AIKO_RESULT_LOCKED 4u /* written while enabled: parameters change only while the drive is off */

/* Watchdog timeout = WatchdogPeriods x ReferencePeriodMs: hard floor and ceiling, whatever the PC writes. */
#define AIKO_WATCHDOG_TIMEOUT_MIN_MS 10u
#define AIKO_WATCHDOG_TIMEOUT_MAX_MS 2000u

/* A reference is accepted if (seq - last) mod 256 is in 1..AIKO_SEQUENCE_WINDOW; a jump beyond it is rejected and
 * leaves `last` unchanged, so one forged frame cannot lock the real sender out. Enable restarts the sequence. */
#define AIKO_SEQUENCE_WINDOW 8u

#define AIKO_STATUS_ENABLED (1u << 0)
#define AIKO_STATUS_FAULT (1u << 1)
#define AIKO_STATUS_WATCHDOG (1u << 2)
#define AIKO_STATUS_AT_LIMIT (1u << 3)
#define AIKO_STATUS_SATURATED (1u << 4)
#define AIKO_STATUS_ESTOP (1u << 5)

/* Return codes of the decode functions (encode functions return the DLC or AIKO_ERR_RANGE); a decoder checks, in
 * this order, the DLC, the DBC ranges of the signals, then the rest (key, reserved bits), as the Python codec. */
#define AIKO_OK 0
#define AIKO_ERR_DLC (-1)
#define AIKO_ERR_RANGE (-2)
#define AIKO_ERR_KEY (-3)
#define AIKO_ERR_RESERVED (-4) /* a bit the DBC does not define is set (ParameterRequest) */

/* The DBC's range of a float32 Value, [-3.4e38, 3.4e38], as the bits of |Value|: the largest float32 inside it.
 * NaN and the infinities are outside. */
#define AIKO_VALUE_MAGNITUDE_MAX_BITS 0x7F7FC99Eul

typedef struct {
    int16_t angle_h_cdeg;
    int16_t angle_v_cdeg;
    int16_t rate_h_qdeg_s; /* 12-bit on the wire */
    int16_t rate_v_qdeg_s;
    uint8_t sequence;
} aiko_reference_t;

typedef struct {
    int16_t angle_h_cdeg;
    int16_t angle_v_cdeg;
    int8_t effort_h_pct;
    int8_t effort_v_pct;
    uint8_t status; /* AIKO_STATUS_* bits 0..5 */
    uint8_t ref_sequence;
} aiko_feedback_t;

typedef struct {
    int16_t rate_h_20mdeg_s; /* 0.05 deg/s */
    int16_t rate_v_20mdeg_s;
    uint16_t rejected_frames;
    uint16_t accepted_references;
} aiko_rates_t;

typedef struct {
    uint8_t index;
    uint8_t write; /* 0 read, 1 write */
    float value;   /* IEEE-754 binary32, little-endian on the wire */
} aiko_parameter_request_t;

typedef struct {
    uint8_t index;
    uint8_t result;
    float value;
} aiko_parameter_reply_t;

typedef struct {
    uint8_t state;
    uint8_t firmware_version;
    uint16_t uptime_s;
} aiko_heartbeat_t;

typedef struct {
    uint8_t command;
    uint8_t target_node; /* 0 = all */
} aiko_command_t;

int8_t aiko_encode_emergency_stop(uint8_t data[8]);
int8_t aiko_decode_emergency_stop(const uint8_t *data, uint8_t dlc);

int8_t aiko_encode_command(const aiko_command_t *msg, uint8_t data[8]);
int8_t aiko_decode_command(const uint8_t *data, uint8_t dlc, aiko_command_t *msg);

int8_t aiko_encode_reference(const aiko_reference_t *msg, uint8_t data[8]);
int8_t aiko_decode_reference(const uint8_t *data, uint8_t dlc, aiko_reference_t *msg);

int8_t aiko_encode_feedback(const aiko_feedback_t *msg, uint8_t data[8]);
int8_t aiko_decode_feedback(const uint8_t *data, uint8_t dlc, aiko_feedback_t *msg);

int8_t aiko_encode_rates(const aiko_rates_t *msg, uint8_t data[8]);
int8_t aiko_decode_rates(const uint8_t *data, uint8_t dlc, aiko_rates_t *msg);

int8_t aiko_encode_parameter_request(const aiko_parameter_request_t *msg, uint8_t data[8]);
int8_t aiko_decode_parameter_request(const uint8_t *data, uint8_t dlc, aiko_parameter_request_t *msg);

int8_t aiko_encode_parameter_reply(const aiko_parameter_reply_t *msg, uint8_t data[8]);
int8_t aiko_decode_parameter_reply(const uint8_t *data, uint8_t dlc, aiko_parameter_reply_t *msg);

int8_t aiko_encode_heartbeat(const aiko_heartbeat_t *msg, uint8_t data[8]);
int8_t aiko_decode_heartbeat(const uint8_t *data, uint8_t dlc, aiko_heartbeat_t *msg);

/* Sequence acceptance rule shared with the emulator: accept if (seq - last) mod 256 is in 1..AIKO_SEQUENCE_WINDOW. */
static inline uint8_t aiko_sequence_is_newer(uint8_t seq, uint8_t last) {
    uint8_t delta = (uint8_t)(seq - last);
    return (uint8_t)(delta >= 1u && delta <= AIKO_SEQUENCE_WINDOW);
}

/* The module's answer to a parameter write (AIKO_RESULT_*), given its state and its current watchdog settings:
 * unknown index, read-only, locked while enabled, then the value's range (NaN is out of range) and the watchdog
 * timeout floor/ceiling. The emulator's parameter_write_result is checked equal to it. */
uint8_t aiko_parameter_write_result(uint8_t state, uint8_t index, float value, float watchdog_periods,
                                    float reference_period_ms);

#ifdef __cplusplus
}
#endif
#endif /* AIKO_JOINT_H */
