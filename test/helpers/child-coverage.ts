// Loaded in each AVA worker before its test file (ava.config.js `require`): the processes a test
// starts (servers, CLIs, workers) collect no coverage for c8. Each would spend about a third more
// CPU and write megabytes that c8 must merge; the coverage figure is the code run in the workers.
delete process.env.NODE_V8_COVERAGE;
