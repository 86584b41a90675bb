"""The wire contract with the ATmega128 joint-controller firmware (DBC, codecs, emulator). Never imports `aiko`."""
