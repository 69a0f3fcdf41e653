"""The workloads, one module each, in the order a run performs them.

Owns: only this list. See bench/runner.py for what a workload module provides.
"""
from workloads import (connectathon, createdelete, devwork, fileop, fio_bulk, mounttime, numa,
                       pager, passthrough, postmark, scale, transport)

ALL = [postmark, connectathon, fileop, createdelete, fio_bulk, devwork, mounttime, pager,
       passthrough, transport, numa, scale]
BY_NAME = {w.NAME: w for w in ALL}
