// One aimock server (a third-party mock of Chat Completions, the Responses API and Anthropic's
// Messages API) on a loopback port, scripted by the fixture file named as the argument.
// Prints the server's URL on one line, then serves until stdin closes.
import { LLMock } from "@copilotkit/aimock";

const mock = new LLMock({ host: "127.0.0.1", port: 0, chunkSize: 7, strict: true });
mock.loadFixtureFile(process.argv[2]);
const url = await mock.start();
process.stdout.write(url + "\n");
process.stdin.resume();
process.stdin.on("end", async () => {
  await mock.stop();
  process.exit(0);
});
