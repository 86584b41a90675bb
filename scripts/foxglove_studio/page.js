// Mounts Studio's App with the remote-file data source, in-memory app settings and one layout ("aiko": a 3D panel
// following the world frame, a Plot panel of joint angles and a link height, the raw /events messages).
(async () => {
  const settings = new Map([["telemetry.telemetryEnabled", false], ["telemetry.crashReportingEnabled", false]]);
  const appConfiguration = {
    get: (key) => settings.get(key),
    set: async (key, value) => void settings.set(key, value),
    addChangeListener: () => {},
    removeChangeListener: () => {},
  };
  const layoutData = await (await fetch("/layout.json")).json();
  const layouts = new Map([
    ["aiko", { id: "aiko", name: "aiko", permission: "CREATOR_WRITE", baseline: { data: layoutData, savedAt: undefined },
      working: undefined, syncInfo: undefined }],
  ]);
  const layoutStorage = {
    list: async () => [...layouts.values()],
    get: async (_namespace, id) => layouts.get(id),
    put: async (_namespace, layout) => (layouts.set(layout.id, layout), layout),
    delete: async (_namespace, id) => void layouts.delete(id),
    importLayouts: async () => {},
    migrateUnnamespacedLayouts: async () => {},
  };
  await window.initI18n();
  const app = React.createElement(window.App, {
    deepLinks: [window.location.href],
    appConfiguration,
    dataSources: [new window.RemoteDataSourceFactory(), new window.McapLocalDataSourceFactory()],
    layoutStorage,
    extensionLoaders: [],
    enableGlobalCss: true,
  });
  ReactDOM.render(app, document.getElementById("root"));
})();
