"""Host side of the studio: lyrics, style, jobs, scheduling, progress and files.

Never imports gradio; talks to the device worker only through its client (`worker_client`) and the worker's
protocol. One song passes through the rows below roughly top to bottom.

| module | role |
|---|---|
| `request` | `SongRequest`: what a musician asks for, validated once against the one table of limits |
| `lyrics/` | LRC parsing, g2p, one phoneme token per latent frame, the per-line report, timing plain lyrics |
| `engine` | `Engine`: requests in, events and finished takes out |
| `jobs`, `units` | a job's ordered event stream and subscribers; the takes it holds (one device job each) |
| `pipeline` | three stages with bounded queues: host inputs -> device -> host outputs; queue positions, ETAs |
| `inputs`, `style`, `reference`, `audio_files` | per-job inputs: style embedding (STYLE call), reference latent, user audio |
| `pool` | the device stage: placement (crash isolation) and event relay over the worker slots |
| `slots`, `ray_slots` | worker slots and their restarts; local and Ray as two sources of slots |
| `worker_client`, `worker_requests`, `heartbeat` | the worker's client: one socket and IO thread, calls and jobs (SUBMIT/STYLE/...) in flight, death noticed (silence budget from measured latency) |
| `worker_process` | the worker as a child process (command line, log, why it ended, reap), or as a thread of this process (`WorkerThread`: tests) |
| `ray_workers` | workers as Ray actors across hosts |
| `events` | the events a job yields, in order |
| `eta` | the ETA model, in one place: a take's time left, a waiting take's wait (`EtaBoard`) |
| `outputs`, `encoder` | files: audio encoded in a child process, tags, the JSON record |
| `style_match` | how close a take came to its style (MuQ-MuLan cosine) |
| `hearing`, `splice` | the lyrics check after a take is written (Whisper on the worker); a re-sing keeping the source's samples |
| `config`, `modelfiles/` | engine settings; the model files (list, locate, fetch, verify) |
| `remote_dit` | the worker's DiT as a torch module, for upstream-style scripts |
| `textfile` | reading a user's text file whatever its encoding |
"""
