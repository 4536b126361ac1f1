// memo() on Preact's core: a component that renders again only when a prop
// changes (shallow comparison). preact/compat has one, but importing compat
// also installs a hook that rewrites every vnode the whole dashboard creates,
// a cost paid on every scroll frame of the windowed panes.
import { Component, h, type FunctionComponent } from 'preact';

export function memo<P extends object>(render: FunctionComponent<P>): FunctionComponent<P> {
  class Memo extends Component<P> {
    static displayName = `Memo(${render.displayName ?? render.name})`;
    shouldComponentUpdate(next: P) {
      return !sameProps(this.props, next);
    }
    render() {
      return h(render, this.props);
    }
  }
  return Memo as unknown as FunctionComponent<P>;
}

function sameProps(a: object, b: object): boolean {
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  for (const k in x) if (k !== 'children' && x[k] !== y[k]) return false;
  for (const k in y) if (!(k in x)) return false;
  return x.children === y.children;
}
