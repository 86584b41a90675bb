/*
 * board.h - the joint module's hardware, as the firmware and the simulator harness both see it.
 *
 * One ATmega128 at 16 MHz per two-axis cardan joint (paper 000, Sec. VIII-C): two 6 W DC motors on 300:1 gears,
 * each driven by an H-bridge with PWM, direction and brake inputs, an incremental quadrature encoder on each gear
 * output, a potentiometer on each gear output for the absolute angle at power-up, and an MCP2515 CAN controller
 * on the SPI bus (1 Mbit/s). Pin-out (ATmega128 TQFP; the harness wires its models to the same pins):
 *
 *   PB0 /SS   -> MCP2515 /CS          PB1 SCK, PB2 MOSI, PB3 MISO: SPI to the MCP2515 (f_osc/2 = 8 MHz)
 *   PD0 INT0  <- MCP2515 /INT (falling edge)
 *   PD1 INT1  <- H-bridge H current-limit flag (rising edge; level read at each tick)
 *   PD2 INT2  <- H-bridge V current-limit flag
 *   PE4 INT4  <- encoder H channel A    PE5 INT5 <- encoder H channel B   (any edge: x4 decoding)
 *   PE6 INT6  <- encoder V channel A    PE7 INT7 <- encoder V channel B
 *   PB5 OC1A  -> H-bridge H PWM         PB6 OC1B -> H-bridge V PWM   (Timer1 fast PWM, TOP = ICR1 = 800: 20 kHz)
 *   PA0 -> H-bridge H direction         PA1 -> H-bridge V direction   (1 = negative voltage)
 *   PA2 -> H-bridge H brake             PA3 -> H-bridge V brake       (1 = short brake; pulled up on the board, so
 *                                                                      a module in reset or with its pins still
 *                                                                      inputs brakes its motors)
 *   PF0 ADC0 <- potentiometer H         PF1 ADC1 <- potentiometer V   (AVCC = 5 V reference)
 *
 * Why encoders for control and potentiometers only at power-up: the derivative of the controller (50 Hz filter
 * at 1 kHz) on a 10-bit potentiometer (0.29 deg per step) would carry +-80 deg/s of quantisation noise into the
 * drive; a 2500-line encoder on the gear output gives 0.036 deg and clean edges, at most ~5500 edges/s per axis at
 * the motor's no-load speed (cheap as INT4..7 interrupts; the ATmega128's INT0..3 cannot trigger on both edges).
 * An incremental encoder does not know where it starts, so the potentiometer sets the count once at power-up.
 */
#ifndef AIKO_BOARD_H
#define AIKO_BOARD_H

#define JM_TICK_HZ 1000u                  /* controller rate (Timer0 CTC) */
#define JM_ENCODER_COUNTS_PER_REV 10000L  /* 2500-line encoder, x4 decoding, on the gear output */
#define JM_PWM_TOP 800                    /* ICR1: full duty; 16 MHz / 801 = 19.98 kHz */
#define JM_SUPPLY_V 12.0f                 /* H-bridge supply */
#define JM_BACK_EMF_V_S_PER_RAD 3.48f     /* k_t N = 0.0116 V s/rad x 300: feed-forward of the reference rate */
#define JM_RATE_FILTER_HZ 50.0f           /* first-order filter on the differentiated encoder angle */
#define JM_POT_SPAN_DEG 300.0f            /* potentiometer: 0 V at -150 deg, AVCC at +150 deg */
#define JM_AVCC_MV 5000u

/* EEPROM: the module's identity and stored settings (written when the module is built; the harness writes it per
 * simulated module). Little-endian floats; a wrong magic or checksum leaves the module silent (no node id). */
#define JM_EEPROM_MAGIC0 0x41u /* 'A' */
#define JM_EEPROM_MAGIC1 0x4Au /* 'J' */
#define JM_EEPROM_LAYOUT 1u
#define JM_EEPROM_SIZE 53u /* magic(2) layout(1) node(1) parameters 1..12 as floats(48) checksum(1): the byte sum is 0 */

#endif /* AIKO_BOARD_H */
