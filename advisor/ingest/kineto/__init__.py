"""torch.profiler / Kineto Chrome traces: read the JSON one event at a time (`event_stream`),
translate each event into graph nodes (`event_mapper`), then settle pids, the window and the
trace's facts into an `OpGraph` (`loader`)."""
