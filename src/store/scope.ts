/** Who is asking: every read and write is confined to one tenant. */
export interface Scope {
  tenant: string;
}
