// A replay worker that never answers and never exits (for the partitioned replay's deadline).
setInterval(() => {}, 1_000);
