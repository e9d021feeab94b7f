// Module resolution hook (see ag-ui-client-1.mjs): `@ag-ui/client` resolves to `ag-ui-client-1`.
export async function resolve(specifier, context, next) {
  return next(specifier === "@ag-ui/client" ? "ag-ui-client-1" : specifier, context);
}
