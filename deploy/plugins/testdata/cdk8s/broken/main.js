// A cdk8s app whose construct refuses its input, as a library does when an
// app asks for the impossible: the plugin must pass cdk8s's error on.
const { App, Chart } = require('cdk8s');
const kplus = require('cdk8s-plus-33');

const app = new App();
const chart = new Chart(app, 'broken');
new kplus.Deployment(chart, 'deployment', { replicas: -1, containers: [] });
app.synth();
