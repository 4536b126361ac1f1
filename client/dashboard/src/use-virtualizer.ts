// @tanstack/virtual-core bound to Preact (as its React adapter does): only the
// rows in and near the viewport are in the DOM, whatever the log's length.
import { useLayoutEffect, useReducer, useState } from 'preact/hooks';
import { elementScroll, observeElementOffset, observeElementRect, Virtualizer, type PartialKeys, type VirtualizerOptions } from '@tanstack/virtual-core';

export type { Virtualizer } from '@tanstack/virtual-core';

type Options = PartialKeys<VirtualizerOptions<HTMLElement, Element>, 'observeElementRect' | 'observeElementOffset' | 'scrollToFn'>;

export function useVirtualizer(options: Options): Virtualizer<HTMLElement, Element> {
  const [, rerender] = useReducer((n: number) => n + 1, 0);
  const resolved: VirtualizerOptions<HTMLElement, Element> = {
    observeElementRect,
    observeElementOffset,
    scrollToFn: elementScroll,
    ...options,
    onChange: (instance, sync) => {
      rerender(0);
      options.onChange?.(instance, sync);
    },
  };
  const [instance] = useState(() => new Virtualizer(resolved));
  instance.setOptions(resolved);
  useLayoutEffect(() => instance._didMount(), []);
  useLayoutEffect(() => instance._willUpdate());
  return instance;
}
