"""How a job walks through the simulated lab in simulated time: the simpy processes of ``SimLabDriver``.

A job's process takes its steps in order, each on a slot of its station (queueing by priority), with the transfer
robot between stations; the last step ends in a measurement (the oracle's value plus noise). Station-down windows
pause the work on a station, a time-to-live watcher stops a job that overstays, and injected faults (robot jams,
station timeouts, bad readings, exhausted consumables) end a job as a failed result whose reason names the fault.

``JobProcesses`` is a mixin: ``SimLabDriver`` holds the state it reads (``env``, ``_resources``, ``_jobs``,
``_stock``, ``_down``, the fault plan and the running totals) and its public verbs start and interrupt these
processes.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping
from typing import Any

import simpy

from instruments.base import TERMINAL_STATES, LabResult
from instruments.faults import FaultKind
from instruments.simlab_records import TRANSFER_ROBOT, JobFailed, JobRecord, job_rng
from instruments.simlab_setup import job_consumables
from vocabulary.domain import ClosedLoopError

__all__ = ["CAUSE_CANCEL", "CAUSE_DOWN", "CAUSE_TTL", "JobProcesses"]

# Causes of a simpy interrupt of a job process.
CAUSE_CANCEL, CAUSE_TTL, CAUSE_DOWN = "cancelled", "ttl", "station_down"


class JobProcesses:
    """The simpy processes of the simulated lab's jobs (a mixin of ``SimLabDriver``, which holds their state)."""

    def _run(self, record: JobRecord) -> Generator[simpy.Event, Any, None]:
        if record.state == "cancelled":  # cancelled before the process got its first step
            return
        record.has_started = True
        job, key = record.job, record.job.job_key
        try:
            for index, step in enumerate(job.steps):
                if index > 0 and self.transfer_s > 0:
                    transfer_s = self.transfer_s
                    if self._meets(key, "robot_jam", self.faults.robot_jam_probability, f"fault:jam:{index}"):
                        self._log_fault("robot_jam", key, TRANSFER_ROBOT)
                        transfer_s += self.faults.robot_jam_s
                    yield from self._occupy(record, TRANSFER_ROBOT, transfer_s)
                median_s, log_sd = self.durations_s[step]
                z = job_rng(self.seed, key, f"duration:{index}:{step}").standard_normal()
                duration_s = median_s * math.exp(log_sd * z)
                stream = f"fault:timeout:{index}:{step}"
                hangs = self._meets(key, "station_timeout", self.faults.station_timeout_probability, stream)
                if hangs:
                    duration_s = self.faults.station_timeout_factor * median_s
                needs = dict(self.consumable_use.get(step, {}))
                if index == 0:
                    for name, units in job_consumables(job, self._stock).items():
                        needs[name] = needs.get(name, 0.0) + units
                yield from self._occupy(record, step, duration_s, needs=needs)
                if hangs:
                    self._log_fault("station_timeout", key, step)
                    raise JobFailed(
                        f"station timeout: {step!r} did not finish its step within {duration_s:.0f} s and its "
                        "watchdog aborted it (injected fault); the sample is lost, resubmit under a new job key"
                    )
        except simpy.Interrupt as interrupt:
            if interrupt.cause == CAUSE_TTL and record.state != "cancelled":  # a cancel that came first wins
                self._finish_failed(record, self._ttl_reason(record))
            else:
                record.state = "cancelled"
            return
        except JobFailed as failure:
            self._finish_failed(record, failure.reason)
            return
        record.result = self._measure(record)
        record.state = "done" if record.result.status == "ok" else "failed"

    def _occupy(
        self, record: JobRecord, resource: str, duration_s: float, needs: Mapping[str, float] | None = None
    ) -> Generator[simpy.Event, Any, None]:
        """Hold one slot of ``resource`` for ``duration_s`` of work, pausing while the station is down."""
        requested_s = self.env.now
        is_station = resource != TRANSFER_ROBOT
        record.location = ("waiting for", resource)
        with self._resources[resource].request(priority=record.priority) as request:
            yield request
            remaining_s, has_begun, is_held_up = duration_s, False, False
            while True:
                up = self._down.get(resource)
                if up is not None:
                    if not (has_begun or is_held_up):  # granted while down: one delay, however many windows
                        is_held_up = True
                        self._log_fault("station_down", record.job.job_key, resource)
                    try:
                        yield up
                    except simpy.Interrupt as interrupt:
                        if interrupt.cause != CAUSE_DOWN:
                            raise
                    continue
                if not has_begun:
                    has_begun = True
                    self._wait_s[resource] += self.env.now - requested_s
                    self._n_waits[resource] += 1
                    if needs:
                        self._consume(record, resource, needs)
                    if is_station:
                        record.state = "running"
                start_s = self.env.now
                record.open_interval, record.working_on = (resource, start_s), resource
                record.location = ("on", resource)
                try:
                    yield self.env.timeout(remaining_s)
                except simpy.Interrupt as interrupt:
                    self._close_interval(record, resource, start_s, is_station)
                    if interrupt.cause != CAUSE_DOWN:
                        raise
                    self._log_fault("station_down", record.job.job_key, resource)
                    remaining_s -= self.env.now - start_s
                    if remaining_s > 1e-9:
                        continue
                    return
                self._close_interval(record, resource, start_s, is_station)
                return

    def _close_interval(self, record: JobRecord, resource: str, start_s: float, is_station: bool) -> None:
        record.open_interval, record.working_on = None, None
        record.intervals.append((resource, start_s, self.env.now))
        self._busy_s[resource] += self.env.now - start_s

    def _consume(self, record: JobRecord, station: str, needs: Mapping[str, float]) -> None:
        short = {name: units for name, units in needs.items() if self._stock.get(name, 0.0) < units}
        if short:
            name, units = next(iter(short.items()))
            self._log_fault("consumable_exhausted", record.job.job_key, station)
            raise JobFailed(
                f"consumable exhausted: {name!r} has {self._stock.get(name, 0.0):g} units left and step "
                f"{station!r} needs {units:g}; call restock() on the lab, then resubmit under a new job key"
            )
        for name, units in needs.items():
            self._stock[name] -= units

    def _station_down(self, station: str, start_s: float, end_s: float) -> Generator[simpy.Event, Any, None]:
        if end_s <= self.env.now:
            return
        if start_s > self.env.now:
            yield self.env.timeout(start_s - self.env.now)
        up = self.env.event()
        self._down[station] = up
        for record in self._jobs.values():
            if record.working_on == station and record.process is not None and record.process.is_alive:
                record.process.interrupt(CAUSE_DOWN)
        yield self.env.timeout(end_s - self.env.now)
        if self._down.get(station) is up:  # a window starting right now may already have replaced it
            del self._down[station]
        up.succeed()

    def _watch_ttl(self, record: JobRecord) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(record.ttl_s)
        if record.state not in TERMINAL_STATES and record.process.is_alive:
            record.process.interrupt(CAUSE_TTL)

    def _ttl_reason(self, record: JobRecord) -> str:
        doing, resource = record.location
        where = f"{doing} {resource!r}" if resource else doing
        self._log_fault("ttl_exceeded", record.job.job_key, resource)
        return (
            f"ttl exceeded: job {record.job.job_key!r} was not finished {record.ttl_s:g} s after submission "
            f"(submitted at t={record.submitted_s:.0f} s, stopped at t={self.env.now:.0f} s {where}); "
            "raise parameters['ttl_s'] or default_ttl_s, or look for a stuck station"
        )

    def _finish_failed(self, record: JobRecord, reason: str) -> None:
        record.result = LabResult(
            job_key=record.job.job_key,
            candidate_id=record.job.candidate.id,
            status="failed",
            reason=reason,
            submitted_s=record.submitted_s,
            completed_s=self.env.now,
            station_log=list(record.station_log),
        )
        record.state = "failed"

    def _measure(self, record: JobRecord) -> LabResult:
        job = record.job
        common = dict(
            job_key=job.job_key,
            candidate_id=job.candidate.id,
            submitted_s=record.submitted_s,
            completed_s=self.env.now,
            station_log=list(record.station_log),
        )
        try:
            truth = float(self.oracle(job.candidate))
        except ClosedLoopError as exc:
            return LabResult(status="failed", reason=str(exc) or type(exc).__name__, **common)
        except KeyError as exc:
            reason = f"the oracle has no value for candidate id {job.candidate.id!r} (KeyError: {exc})"
            return LabResult(status="failed", reason=reason, **common)
        except Exception as exc:  # a lab reports a broken measurement as a failed job, never drops it
            return LabResult(status="failed", reason=f"the oracle raised {type(exc).__name__}: {exc}", **common)
        if not math.isfinite(truth):
            reason = f"the oracle returned {truth} for candidate id {job.candidate.id!r}; no finite value to measure"
            return LabResult(status="failed", reason=reason, **common)
        if self._meets(job.job_key, "bad_reading", self.faults.bad_reading_probability, "fault:bad_reading"):
            station = job.steps[-1]
            self._log_fault("bad_reading", job.job_key, station)
            reason = (
                f"bad reading: the detector on {station!r} returned an implausible signal (injected fault); "
                "re-measure under a new job key"
            )
            return LabResult(status="failed", reason=reason, **common)
        threshold = getattr(self, "fails_at_or_below", None)
        if threshold is not None and truth <= threshold:
            unit = getattr(self, "unit", None) or ""
            prop = getattr(self.oracle, "property", "value")
            reason = f"no product: true {prop} <= {threshold:g} {unit}".rstrip()
            return LabResult(status="failed", reason=reason, **common)  # the failure policy says what it means
        noise = self.noise_sd * job_rng(self.seed, job.job_key, "measurement").standard_normal()
        values = {}
        for name, measured in getattr(self, "measured", {}).items():  # every other property, its own noise stream
            try:
                other = float(measured.oracle(job.candidate))
            except Exception as exc:  # noqa: BLE001 - an objective without a truth fails the job, with why
                other, why = math.nan, f"no value for {name!r}: {exc}"
            else:
                why = f"no finite value for {name!r} for candidate id {job.candidate.id!r}"
            if not math.isfinite(other):
                if measured.is_required:
                    return LabResult(status="failed", reason=why, **common)
                continue  # an outcome constraint the table does not hold for this point: not measured
            other_noise = measured.noise_sd * job_rng(self.seed, job.job_key, f"measurement:{name}").standard_normal()
            values[name] = measured.clip(other + other_noise)
        return LabResult(status="ok", value=truth + noise, uncertainty=self.noise_sd, values=values, **common)

    def _meets(self, job_key: str, kind: str, probability: float, stream: str) -> bool:
        """Whether a job meets a fault here: forced for its key, or drawn from its own stream."""
        if self.faults.forced.get(job_key) == kind:
            return True
        return probability > 0.0 and job_rng(self.seed, job_key, stream).random() < probability

    def _log_fault(self, kind: FaultKind, job_key: str, resource: str) -> None:
        self._fault_log.append((kind, job_key, resource, float(self.env.now)))
