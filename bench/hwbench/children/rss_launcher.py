"""Child: run ARGV once from a small process and print ``exitcode maxrss_kib wall_s``.

Linux charges a process, at ``exec``, with the peak RSS of the memory image it replaces. A
child forked by the (large) benchmark process would therefore report at least the benchmark's
own RSS. This launcher is started with ``-I -S`` and imports nothing beyond builtins, so the
image its forked child replaces is about 5 MiB (less than any Python start-up); the RSS the
child then reports is its own. stdin and stdout of the child go to /dev/null.
"""

import posix
import sys
import time


def main() -> None:
    argv = sys.argv[1:]
    t0 = time.perf_counter()
    pid = posix.fork()
    if pid == 0:
        try:
            fd = posix.open("/dev/null", posix.O_RDWR)
            posix.dup2(fd, 0)
            posix.dup2(fd, 1)
            posix.execve(argv[0], argv, posix.environ)
        finally:
            posix._exit(127)
    _, status, usage = posix.wait4(pid, 0)
    wall = time.perf_counter() - t0
    sys.stdout.write(f"{posix.waitstatus_to_exitcode(status)} {usage.ru_maxrss} {wall:.6f}\n")


main()
