"""Device selection: ``cuda`` when present, CPU always."""
from __future__ import annotations

import torch


def default_device() -> torch.device:
    """The device notebooks compute on: the first GPU if there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def available_devices() -> list[torch.device]:
    """Every device the checks run on: always the CPU, plus ``cuda`` when available."""
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    return devices


def devices_for(full: bool) -> list[torch.device]:
    """Where a check runs: the student's device for a visible check, every device for a hidden one."""
    return available_devices() if full else [default_device()]
