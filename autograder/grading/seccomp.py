"""The sandbox's seccomp filter, compiled here into classic BPF for bubblewrap's ``--seccomp FD``.

The sandbox already has no capabilities, so most of these calls would fail anyway; the filter
takes away the kernel code behind them, which is where the attack surface is: new namespaces
(``unshare``, ``setns``, ``clone`` with a ``CLONE_NEW*`` flag), the mount API, ``ptrace`` and
reading other processes' memory, ``bpf``, the key store, ``perf_event_open``, ``userfaultfd``,
modules, kexec, swap, ``reboot``, ``syslog``, handles to files by inode, x86's I/O ports, and
``ioctl`` ``TIOCSTI``/``TIOCLINUX`` (typing into a terminal).  They fail with ``EPERM``;
``clone3`` fails with ``ENOSYS``, because its flags are behind a pointer the filter cannot read:
glibc then falls back to ``clone``, which the filter can check (as Docker's and Flatpak's
filters do).  Everything else is allowed.  ``personality`` stays allowed: its risky flags
(``READ_IMPLIES_EXEC``, ``ADDR_NO_RANDOMIZE``) weaken only the caller's own process.

A syscall made through another ABI than the machine's (on x86_64, 32-bit ``int 0x80`` calls,
which have numbers of their own and another ``arch``) kills the process: the numbers here would
not mean the same there.  x32 calls (the same ``arch``, numbers with bit ``0x40000000``) fail with
``ENOSYS``.  On a machine that is neither x86_64 nor aarch64 :func:`program` returns ``None``
and the sandbox runs without the filter (:func:`autograder.grading.sandbox.hardening` says so).

The program reads ``struct seccomp_data`` (``<linux/seccomp.h>``)::

    offset  0  int   nr        the syscall number
    offset  4  u32   arch      AUDIT_ARCH_*
    offset  8  u64   instruction_pointer
    offset 16  u64   args[6]   args[i] at 16 + 8*i; both arches are little endian, so the low
                               32 bits come first (the only half checked: the flags checked
                               here are 32-bit in the kernel, which ignores the high half)

and is an array of ``struct sock_filter`` (``<linux/filter.h>``), 8 bytes each: u16 code,
u8 jt, u8 jf, u32 k.  Each rule is "jump over my return unless it matches", so no jump goes
further than a few instructions and the program reads top to bottom.
"""
from __future__ import annotations

import errno
import platform
import struct

# Syscall numbers: x86_64 from the kernel's arch/x86/entry/syscalls/syscall_64.tbl, as installed in
# /usr/include/x86_64-linux-gnu/asm/unistd_64.h; aarch64 from include/uapi/asm-generic/unistd.h
# (/usr/include/asm-generic/unistd.h), which arm64 uses.  aarch64 has no iopl/ioperm.
DENIED = {
    #                      x86_64 aarch64
    "unshare":             (272, 97),
    "setns":               (308, 268),
    "mount":               (165, 40),
    "umount2":             (166, 39),
    "pivot_root":          (155, 41),
    "chroot":              (161, 51),
    "ptrace":              (101, 117),
    "process_vm_readv":    (310, 270),
    "process_vm_writev":   (311, 271),
    "bpf":                 (321, 280),
    "keyctl":              (250, 219),
    "add_key":             (248, 217),
    "request_key":         (249, 218),
    "perf_event_open":     (298, 241),
    "userfaultfd":         (323, 282),
    "kexec_load":          (246, 104),
    "kexec_file_load":     (320, 294),
    "init_module":         (175, 105),
    "finit_module":        (313, 273),
    "delete_module":       (176, 106),
    "open_by_handle_at":   (304, 265),
    "name_to_handle_at":   (303, 264),
    "open_tree":           (428, 428),
    "move_mount":          (429, 429),
    "fsopen":              (430, 430),
    "fsconfig":            (431, 431),
    "fsmount":             (432, 432),
    "fspick":              (433, 433),
    "mount_setattr":       (442, 442),
    "swapon":              (167, 224),
    "swapoff":             (168, 225),
    "reboot":              (169, 142),
    "acct":                (163, 89),
    "quotactl":            (179, 60),
    "quotactl_fd":         (443, 443),
    "syslog":              (103, 116),
    "lookup_dcookie":      (212, 18),
    "iopl":                (172, None),
    "ioperm":              (173, None),
}
CLONE = (56, 220)  # flags are args[0] on both (aarch64's CLONE_BACKWARDS moves only tls/child_tid)
CLONE3 = (435, 435)
IOCTL = (16, 29)  # the request is args[1]

ARCHES = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}  # AUDIT_ARCH_*, column above
X32_SYSCALL_BIT = 0x40000000
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.  CLONE_NEWTIME (0x80) is left
# out: in clone() the low byte is the exit signal, and NEWTIME works only through unshare and
# clone3, both denied.
CLONE_NEW_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
TIOCSTI, TIOCLINUX = 0x5412, 0x541C

# Classic BPF opcodes (<linux/bpf_common.h>) and seccomp's return values (<linux/seccomp.h>).
LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS: A = the 32-bit word at offset k
JEQ, JGE, JSET = 0x15, 0x35, 0x45  # BPF_JMP | BPF_JEQ/JGE/JSET | BPF_K: compare A with k
RET = 0x06  # BPF_RET | BPF_K
ALLOW, KILL_PROCESS = 0x7FFF0000, 0x80000000
NR, ARCH = 0, 4


def errno_(code: int) -> int:
    return 0x00050000 | code  # SECCOMP_RET_ERRNO


def arg(i: int) -> int:
    return 16 + 8 * i  # low half of args[i]


def load(offset: int) -> tuple:
    return (LD_W_ABS, 0, 0, offset)


def ret(action: int) -> tuple:
    return (RET, 0, 0, action)


def match(op: int, k: int, then_skip: int = 0, else_skip: int = 1) -> tuple:
    """Compare A with ``k``; skip ``then_skip`` instructions if it holds, ``else_skip`` if not."""
    return (op, then_skip, else_skip, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (this one's by default) as bwrap reads it, or ``None`` where
    this module has no syscall table for it."""
    machine = machine or platform.machine()
    if machine not in ARCHES:
        return None
    audit_arch, column = ARCHES[machine]
    code = [load(ARCH), match(JEQ, audit_arch, 1, 0), ret(KILL_PROCESS), load(NR)]
    if machine == "x86_64":
        code += [match(JGE, X32_SYSCALL_BIT), ret(errno_(errno.ENOSYS))]
    for numbers in DENIED.values():
        if numbers[column] is not None:
            code += [match(JEQ, numbers[column]), ret(errno_(errno.EPERM))]
    code += [match(JEQ, CLONE3[column]), ret(errno_(errno.ENOSYS))]
    # After loading an argument A is no longer the number: these two rules end in a return.
    code += [match(JEQ, CLONE[column], 0, 4), load(arg(0)),
             match(JSET, CLONE_NEW_FLAGS), ret(errno_(errno.EPERM)), ret(ALLOW)]
    code += [match(JEQ, IOCTL[column], 0, 5), load(arg(1)),
             match(JEQ, TIOCSTI, 1, 0), match(JEQ, TIOCLINUX), ret(errno_(errno.EPERM)), ret(ALLOW)]
    code.append(ret(ALLOW))
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in code)
