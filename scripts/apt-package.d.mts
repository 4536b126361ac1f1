/** True when `binary` (a file `pkg` installs) exists, after installing `pkg` if it was missing and root may. */
export function ensureAptPackage(opts: { binary: string; pkg: string; what: string }): boolean;
