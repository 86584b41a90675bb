"""The firmware builds for the ATmega128 with Debian's avr-gcc (-Os) and fits the part with room to spare."""

import re
import subprocess

from tests.firmware_build import require_firmware


def test_the_firmware_fits_the_atmega128():
    elf, _ = require_firmware()
    out = subprocess.run(["avr-size", "-A", str(elf)], capture_output=True, text=True, check=True).stdout
    sections = {m[1]: int(m[2]) for m in re.finditer(r"^\.(\w+)\s+(\d+)", out, re.MULTILINE)}
    flash = sections["text"] + sections.get("data", 0)
    ram = sections.get("data", 0) + sections.get("bss", 0)
    print(f"\natmega128 firmware: {flash} B flash ({flash / 131072:.1%} of 128 KiB), {ram} B static RAM "
          f"({ram / 4096:.1%} of 4 KiB)")  # fmt: skip
    assert flash < 16 * 1024  # 10.7 KiB measured (2026-11-27), of which ~4 KiB float library for the parameters
    assert ram < 1024  # 672 B measured; the stack has the other 3.4 KiB
    assert sections.get("eeprom", 0) == 0  # the EEPROM image is the module's, written when it is built (board.h)
