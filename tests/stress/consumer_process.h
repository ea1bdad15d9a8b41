// The checked consumer process of the chaos and soak programs: the
// `consume` subcommand of bc_chaos and bc_soak.
//
//   bc_chaos consume --endpoint E --samples N --seed S [--batch-size B]
//       [--join immediate|next_epoch] [--prefetch P] [--no-drop-last]
//       [--batches K] [--reconnect] [--connect-timeout-ms MS]
//       [--hold-every N --hold-ms MS]
//
// Connects to the server at E (whose source is `--synthetic N --seed S`),
// reads with ReadChecked (checked_reader.h) and prints report lines
// (report.h) on stdout. With --reconnect it outlives its server: when Next()
// fails with Unavailable (the server died or stopped) it connects again,
// retrying every 50 ms while no server answers, and checks the new
// connection from scratch. Exit status: 0 after --batches batches; 4 when
// Next() failed (without --reconnect); 2 for bad arguments.
#pragma once

namespace batchcast::stress {

// argv[0] is the subcommand's name ("consume").
int RunConsumerProcess(int argc, char** argv);

}  // namespace batchcast::stress
