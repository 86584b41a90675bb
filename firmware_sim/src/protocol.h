/*
 * protocol.h - the harness's stepping protocol on its stdin/stdout (binary, little-endian).
 *
 * Copyright (C) 2026 the Aiko stack authors. GPL-3.0-or-later (see ../LICENSE): this program links simavr.
 *
 * The Python side (firmware_protocol/emulator/harness_client.py, MIT: it only speaks this protocol over a pipe)
 * owns the plant and the clock; the harness owns the AVR cores, their boards and the CAN bus. Every request is
 * answered before the next is read. Times are CPU cycles of the 16 MHz cores since power-up (one clock for all).
 *
 * Request:  u8 opcode, u32 payload length, payload.   Reply: u8 status (0 ok, 1 error), u32 length, payload
 * (on error: a UTF-8 message).
 *
 * 'I' init     u8 n_modules; per module: u8 eeprom[HARNESS_EEPROM_BYTES], i32 position_q8[2], u16 pot_mv[2]
 *              -> u16 module_address, u16 module_size, u16 board_address, u16 board_size, u16 mcp_stats_address
 *                 (the firmware's g_module / g_board / mcp_stats in SRAM, from the ELF's symbols)
 * 'S' step     u64 t_end, u8 n_sub; per module: i32 position_q8[2] (encoder position at t_end, in 1/256 count:
 *              edges are spread linearly from the last one), u16 pot_mv[2], u8 current_limited (bit 0 H, bit 1 V);
 *              u16 n_frames; frames (the PC's, queued at the adapter at the step's start), each HARNESS_FRAME_IN
 *              -> u64 t_now; per module: i32 duty_ppm[n_sub][2] (signed duty averaged over each of n_sub equal
 *                 parts of the step, 1e-6 of full: the plant's physics sub-steps), u8 flags (bit 0/1 brake H/V at
 *                 t_now, bit 2 a reset happened, bit 3 the core stopped);
 *                 u16 n_frames; frames the modules sent, in bus order, each HARNESS_FRAME_OUT
 * 'K' plant    f64 substep_s, half_free_play_rad, contact_stiffness, contact_damping, supply_v, resistance_ohm,
 *              back_emf_v_s, current_limit_a, torque_per_amp, gear_viscous, reflected_inertia, inertia, damping,
 *              limit_h_rad, limit_v_rad, 0.0; u32 substeps_per_period; u8 sensor_joint; per module f64 gear angle,
 *              gear rate, joint angle, joint rate of axis H then V  -> (empty): the drives and joints run here
 *              from now on (plant.h: the Python emulator's drive and independent-inertia plant)
 * 'R' run      u64 t_end (whole sub-steps ahead); u16 n_frames; frames (the PC's, at the step's start)
 *              -> u64 t_now; per module: f64 gear angle, gear rate, joint angle, joint rate (H, then V), u8 flags,
 *                 u8 current limit in the last sub-step (bits), i32 duty_ppm[2] of the last sub-step;
 *                 u64 driven axis-periods; per module u32 limited periods[2] (driven and current-limited), u64 0;
 *                 u16 n_frames; frames the modules sent, HARNESS_FRAME_OUT each
 * 'P' peek     u8 module, u16 address, u16 length  -> the bytes of the module's SRAM
 * 'W' poke     u8 module, u16 address, u8 value    -> (empty): an I/O register write, as the CPU would do it
 *              (fault injection in tests, e.g. stopping the tick timer)
 * 'T' stats    -> per module: u64 awake_cycles, u64 total_cycles, u32 max_awake_cycles_per_ms,
 *                 u32 encoder_edges, u32 frames_sent, u32 frames_received, u32 resets;
 *                 bus: u64 busy_cycles, u32 frames, u32 arbitration_losses
 * 'Q' quit     -> (empty), then the harness exits 0
 *
 * Frame in  (HARNESS_FRAME_IN = 14 bytes):  u32 id (bit 31 extended, bit 30 remote), u8 dlc, u8 pad, u8 data[8]
 * Frame out (HARNESS_FRAME_OUT = 22 bytes): u64 t_end_of_frame, u32 id, u8 dlc, u8 module, u8 data[8]
 */
#ifndef HARNESS_PROTOCOL_H
#define HARNESS_PROTOCOL_H

#define HARNESS_EEPROM_BYTES 53
#define HARNESS_FRAME_IN 14
#define HARNESS_FRAME_OUT 22
#define HARNESS_ID_EXTENDED 0x80000000u
#define HARNESS_ID_REMOTE 0x40000000u

#define HARNESS_FLAG_BRAKE_H 0x01u
#define HARNESS_FLAG_BRAKE_V 0x02u
#define HARNESS_FLAG_RESET 0x04u
#define HARNESS_FLAG_CRASHED 0x08u

#endif
