"""DRAM energy per command, from a device preset's datasheet currents (IDD), as Micron's DDR4 power note
(TN-40-07) and DRAMPower define them.

A current measured in a steady pattern, less the standby current that would flow anyway, times the supply
voltage and the time the pattern takes, is the energy of one command of that pattern:

- an activate and its precharge: `VDD * (IDD0 * tRC - IDD3N * tRAS - IDD2N * (tRC - tRAS))` (IDD0 is one bank
  cycling activate to precharge every tRC; the bank is open for tRAS of it and closed for the rest);
- a line read: `VDD * (IDD4R - IDD3N) * nburst` clocks (IDD4R is reads back to back); a write alike with IDD4W;
- a refresh: `VDD * (IDD5B - IDD3N) * tRFC`, once a tREFI for every rank;
- background: `VDD * IDD3N` the whole time.  Rows stay open between requests (an open page policy), so the
  banks are taken as active; power-down is not modelled, which makes this an upper bound when DRAM idles.

Each figure is for one device, times the `devices` of a rank (a fraction where the currents are for a part
wider than the channel: an HBM pseudo channel is half of the channel its datasheet describes).  The
interface (drivers, termination, the wires between the chips) is `io_bit_pj` a bit moved, which the currents,
measured with no output load, leave out.  Everything is a linear function of counters both engines keep, so
the engines agree on it by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..machine import DramDevice
from .stats import Stats

PJ = 1e-12


@dataclass(frozen=True)
class CommandEnergy:
    """One channel's DRAM energies, in joules (a command) and watts (background and refresh)."""

    activate_j: float    # an activate with its precharge
    read_j: float        # a line read
    write_j: float       # a line written
    io_j: float          # a line over the interface, either way
    background_w: float  # every rank's standby power
    refresh_w: float     # every rank's refreshes, averaged over tREFI


def command_energy(d: DramDevice, scale: float = 1.0) -> CommandEnergy:
    """The energies of one channel of device `d` (module docstring), each times `scale`
    (`energy.dram_device_scale`)."""
    ns = d.tck_ps / 1000.0
    n = d.devices * scale
    pc = 1e-12  # a milliamp for a nanosecond is a picocoulomb
    tras, trc = d.nras * ns, d.nrc * ns
    burst = d.nburst * ns
    return CommandEnergy(
        activate_j=d.vdd * (d.idd0 * trc - d.idd3n * tras - d.idd2n * (trc - tras)) * pc * n,
        read_j=d.vdd * (d.idd4r - d.idd3n) * burst * pc * n,
        write_j=d.vdd * (d.idd4w - d.idd3n) * burst * pc * n,
        io_j=d.io_bit_pj * d.burst_bytes * 8 * PJ * scale,
        background_w=d.vdd * d.idd3n * 1e-3 * n * d.ranks,
        refresh_w=d.vdd * (d.idd5b - d.idd3n) * 1e-3 * d.nrfc / d.nrefi * n * d.ranks)


def dynamic_parts(st: Stats, d: DramDevice, scale: float = 1.0) -> dict[str, float]:
    """Joules of the run's activates, line reads, line writes and interface transfers."""
    e = command_energy(d, scale)
    lines = st["dram_bytes"] / d.burst_bytes
    writes = st["dram.write_bytes"] / d.burst_bytes
    return {"activate": st["dram.activates"] * e.activate_j, "read": (lines - writes) * e.read_j,
            "write": writes * e.write_j, "io": lines * e.io_j}


def static_parts(d: DramDevice, channels: int, scale: float = 1.0) -> dict[str, float]:
    """Watts of `channels` channels' background and refresh."""
    e = command_energy(d, scale)
    return {"background": e.background_w * channels, "refresh": e.refresh_w * channels}
