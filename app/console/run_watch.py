"""`oakwatch run --workers N` (or `--executor ray`) on a terminal: the run's own console over all
of its trials at once.

The run plays in a background thread (its trials in worker processes or Ray tasks); the console is
the attached console (app.review.attach) over the run's folder, so what it shows is what any other
console attached to the same folder shows, and its operator keys go through the run's control
socket like theirs. Unlike `attach`, q here ends the run cleanly (running trials are ended and
recorded, no new one starts), and the console closes when the run has finished its records.
SIGINT, SIGTERM and SIGHUP do the same as q.
"""

from __future__ import annotations

import threading
from pathlib import Path

from textual.binding import Binding

from app.review.attach import AttachApp

DONE_CHECK_SECONDS = 0.25


class RunWatchApp(AttachApp):
    TITLE = "oakwatch run"
    BINDINGS = [*[b for b in AttachApp.BINDINGS if b.key != "q"], Binding("q", "quit_run", "Quit (ends the run)")]

    def __init__(self, root: Path, runner, **kwargs):
        super().__init__(root, **kwargs)
        self.runner = runner
        self.run_thread: threading.Thread | None = None
        self.run_error: BaseException | None = None
        self.quitting = False

    async def on_mount(self) -> None:
        await super().on_mount()
        self.run_thread = threading.Thread(target=self._play, name="oakwatch-run", daemon=True)
        self.run_thread.start()
        self.set_interval(DONE_CHECK_SECONDS, self._check_done, name="run-done")

    def _play(self) -> None:
        try:
            self.runner.run()
        except BaseException as exc:  # the runner writes its own records; keep what escaped for the exit
            self.run_error = exc

    @property
    def run_done(self) -> bool:
        return self.run_thread is not None and not self.run_thread.is_alive()

    @property
    def run_over(self) -> bool:
        return self.run_done or super().run_over

    async def _check_done(self) -> None:
        if not self.run_done:
            return
        if self.quitting:
            await self.poll()
            self.exit(0)
        elif not getattr(self, "_announced", False):
            self._announced = True
            self.refresh_bindings()  # the footer drops the controls
            await self.poll()
            self.notify("The run has finished: q closes the console.", timeout=10)

    def stop_run(self, reason: str, detail: str, cause: str | None = None) -> None:
        if self.run_done:
            self.exit(0)
            return
        self.quitting = True
        self.runner.control.stop_run(reason, detail, cause)
        self.notify("Ending the run cleanly: running trials are ended and recorded…", timeout=10)

    def action_quit_run(self) -> None:
        self.stop_run("operator-quit", "operator quit")


def run_watched(runner) -> int:
    """Run `runner` (an ExperimentRunner of many trials at once) under its console; the exit status."""
    from app.commands.signals import SignalStop
    from panes.trial.image_frame import frame_protocol
    from sessions.analysis.summary import exit_status
    from sessions.execute.workers import make_pool

    root = runner.folder.root
    try:  # before the app takes over stdout and stderr: Ray and the forkserver hand stderr to children
        runner.pool = make_pool(runner)
    except RuntimeError as exc:  # the Ray cluster cannot be used: no trial ran, and the folder says why
        runner.stop_reason, runner.fatal = "executor-unavailable", str(exc)
        runner.summary = runner._finish()
        print(f"oakwatch: error: {exc}")
        return 2
    app = RunWatchApp(root, runner, frame_protocol=frame_protocol())

    def defer(callback) -> None:
        loop = app.event_loop
        if loop is not None:
            loop.call_soon_threadsafe(callback)
        else:
            callback()

    signals = SignalStop(lambda name: app.stop_run("signal", name, f"signal:{name}"), root, defer=defer)
    runner.watchdog_options = {**runner.watchdog_options, "signal_waiting": signals.waiting}
    signals.install()
    try:
        app.run()
    finally:
        signals.restore()
        if app.run_thread is not None and app.run_thread.is_alive():  # the console died: still finish the run
            runner.control.stop_run("operator-quit", "console closed")
            app.run_thread.join()
    summary = runner.summary
    if summary is None:
        print(f"oakwatch: error: the run could not write its final records ({runner.fatal}); "
              f"`oakwatch recover {root}`")
        return 2
    if runner.fatal:
        print(f"oakwatch: error: the run stopped: {runner.fatal}")
    print(f"evidence: {root} (check with: oakwatch verify {root})")
    return exit_status(summary)
