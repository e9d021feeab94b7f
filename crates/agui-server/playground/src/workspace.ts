// Paths as the user knows them: relative to the thread's workspace. The agent's tools name
// absolute paths on the server (`<workspace_root>/<tree>/<slot>/notes.md`); the page is never
// told the workspace's path, so it recognises it in them: the server places every thread's
// workspace at `<workspace_root>/<tree>/<slot>`, a tree id being 26 lowercase base32 characters
// and a slot 10 of them (or a number, for threads of older versions), see agui-session's
// `places.rs`. The first such pair in a path ends the workspace; the thread's own is the one its
// first command ran in (commands start in the workspace), else the first one its paths name.
// A path elsewhere (another thread's slot, `/tmp`) stays absolute.

/** `<anything>/<tree>/<slot>` at the start of a path, up to a `/` or its end. */
const WORKSPACE = /^(\/.*?\/[a-z2-7]{26}\/(?:[a-z2-7]{10}|[0-9]{1,20}))(?=\/|$)/;

/** The workspace a path is in, by the server's layout, if any. */
export function workspaceIn(path: string): string | undefined {
  return WORKSPACE.exec(plainPath(path))?.[1];
}

/** `file:///x` as `/x`; other strings unchanged. */
export function plainPath(value: string): string {
  if (!value.startsWith("file://")) return value;
  try {
    return decodeURIComponent(value.slice("file://".length));
  } catch {
    return value.slice("file://".length);
  }
}

/** How a thread's paths are shown: relative to its workspace once the page knows it. */
export class WorkspacePaths {
  /** The workspace's absolute path, once seen. */
  root: string | undefined;
  private fromCommand = false;

  /** Learns from a command's working directory (`command`) or any other path the thread names. */
  learn(path: string, command: boolean): void {
    if (this.fromCommand || (this.root && !command)) return;
    const root = workspaceIn(path);
    if (!root) return;
    this.root = root;
    this.fromCommand = command;
  }

  /** `path` relative to the workspace (`""` for the workspace itself), or undefined outside it. */
  relative(path: string): string | undefined {
    const plain = plainPath(path).replace(/\/+$/, "");
    if (!this.root) return undefined;
    if (plain === this.root) return "";
    if (plain.startsWith(`${this.root}/`)) return plain.slice(this.root.length + 1);
    return undefined;
  }

  /** `path` as shown: relative (`.` for the workspace), else as given (without `file://`). */
  display(path: string): string {
    const rel = this.relative(path);
    if (rel === undefined) return plainPath(path);
    return rel || ".";
  }
}
